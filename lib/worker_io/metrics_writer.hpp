// <run dir>/metrics.jsonl: one JSON object per line, appended and flushed per line by global rank 0, so
// readers (mgtrain's status API, scripts, `tail -f`) can follow it while it grows. A resumed or restarted
// run appends to the same file (steps may repeat; readers keep the last row per step). Rows:
//   {"kind":"train","step":120,"epoch":1,"time":1763800000.123,"loss":0.5312,"lr":0.01,"samples_per_s":5012.3,
//    "step_time_ms":12.3,"rss_bytes":123456789,"attempt":0}  (+ "cuda_allocated_bytes", "loss_scale" when known)
//   {"kind":"eval","step":500,"epoch":1,"time":...,"eval.loss":0.41,"eval.accuracy":0.86,"eval.perplexity":1.5,"attempt":0}
// Non-finite numbers (a diverged loss) are written as null. Written with nlohmann::json: fractional values in the
// shortest form that reads back exactly ("time" to the millisecond, e.g. 1763800001.5; 65536.0 for a float).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "util/fd.hpp"

namespace mgtrain {

struct TrainMetricsRow {
  std::int64_t step = 0;
  std::int64_t epoch = 0;  // 1-based, as the progress line shows it
  double time = 0;         // Unix seconds
  double loss = 0;         // mean over the steps since the previous train row
  double lr = 0;
  double samples_per_s = 0;
  double step_time_ms = 0;
  std::int64_t rss_bytes = 0;
  int attempt = 0;  // TORCHELASTIC_RESTART_COUNT
  std::optional<std::int64_t> cuda_allocated_bytes;
  std::optional<double> loss_scale;
};

struct EvalMetricsRow {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  double time = 0;
  double loss = 0;
  double accuracy = 0;
  std::optional<double> perplexity;  // language models
  int attempt = 0;
};

// The rows as one line of JSON each (no newline).
std::string train_metrics_json(const TrainMetricsRow& row);
std::string eval_metrics_json(const EvalMetricsRow& row);

// This process's resident set size from /proc/self/statm; 0 when it cannot be read.
std::int64_t resident_set_bytes();

class MetricsWriter {
 public:
  // Opens `path` for appending (creating it). If an earlier writer died mid-line, the torn line is ended
  // first so the new rows start on a line of their own. Throws SystemError naming the path.
  explicit MetricsWriter(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Appends `json` + '\n' with one write(2). A failed write warns once on stderr and stops writing
  // (training goes on).
  void append(const std::string& json);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  Fd fd_;
};

}  // namespace mgtrain
