// Rows of metrics.jsonl and their appending writer (see metrics_writer.hpp).
#include "worker_io/metrics_writer.hpp"
#include "util/json_text.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/log.hpp"

namespace mgtrain {
namespace {

using Json = nlohmann::ordered_json;

// The keys every row starts with: kind, step, epoch, time.
template <class Row>
Json row_start(const char* kind, const Row& row) {
  Json out = Json::object();
  out["kind"] = kind;
  out["step"] = row.step;
  out["epoch"] = row.epoch;
  out["time"] = json_seconds(row.time);
  return out;
}

}  // namespace

std::string train_metrics_json(const TrainMetricsRow& row) {
  Json out = row_start("train", row);
  out["loss"] = json_number(row.loss);
  out["lr"] = json_number(row.lr);
  out["samples_per_s"] = json_number(row.samples_per_s);
  out["step_time_ms"] = json_number(row.step_time_ms);
  out["rss_bytes"] = row.rss_bytes;
  if (row.cuda_allocated_bytes) out["cuda_allocated_bytes"] = *row.cuda_allocated_bytes;
  if (row.loss_scale) out["loss_scale"] = json_number(*row.loss_scale);
  out["attempt"] = row.attempt;
  return json_text(out);
}

std::string eval_metrics_json(const EvalMetricsRow& row) {
  Json out = row_start("eval", row);
  out["eval.loss"] = json_number(row.loss);
  out["eval.accuracy"] = json_number(row.accuracy);
  if (row.perplexity) out["eval.perplexity"] = json_number(*row.perplexity);
  out["attempt"] = row.attempt;
  return json_text(out);
}

std::int64_t resident_set_bytes() {
  std::FILE* file = std::fopen("/proc/self/statm", "r");
  if (!file) return 0;
  long long size_pages = 0, resident_pages = 0;
  const bool ok = std::fscanf(file, "%lld %lld", &size_pages, &resident_pages) == 2;
  std::fclose(file);
  return ok ? resident_pages * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  fd_.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd_)
    throw SystemError("cannot open the metrics file " + path + " (set log.metrics_every_steps: 0 to go without)",
                      errno);
  // A writer that died mid-line left a torn row: end it so ours start on a line of their own.
  char last = '\n';
  const off_t size = ::lseek(fd_.get(), 0, SEEK_END);
  if (size > 0 && ::pread(fd_.get(), &last, 1, size - 1) == 1 && last != '\n') append("");
}

MetricsWriter::~MetricsWriter() = default;

void MetricsWriter::append(const std::string& json) {
  if (!fd_) return;
  if (const std::string problem = write_fully(fd_.get(), json + '\n'); !problem.empty()) {
    log::warn("cannot write the metrics file {} ({}); no more metrics rows this run", path_, problem);
    fd_.reset();
  }
}

}  // namespace mgtrain
