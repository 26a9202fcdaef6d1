// The runs under a log directory, summarised for `mgtrain runs` and found by name for `mgtrain plot`
// (docs/monitoring.md): each <log_dir>/<run_id>/ with its run.json (run_record.hpp) and metrics.jsonl
// (metrics_reader.hpp). Torch-free and cairo-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "observe/run_record.hpp"

namespace mgtrain {

// The best evaluation result of a run: eval.accuracy's maximum when the run has one, else eval.loss's minimum.
struct BestMetric {
  std::string metric;  // "eval.accuracy" or "eval.loss"
  double value = 0;
  std::int64_t step = 0;
};

struct RunSummary {
  std::string run_id;                 // the directory's name
  std::string directory;              // <log_dir>/<run_id>
  std::string status;                 // effective status (run_record.hpp), or "unknown" without a run.json
  std::optional<RunRecord> record;    // absent: no run.json (a run from before run history, or not node 0)
  std::string record_problem;         // run.json exists but could not be read: why
  std::optional<double> start_time;   // Unix seconds: run.json's, else config.yaml's modification time
  std::optional<double> duration_s;   // end - start; while running: now - start; interrupted: last metric row - start
  std::optional<std::int64_t> steps;  // last train step in metrics.jsonl
  std::optional<BestMetric> best;
  std::size_t metrics_problems = 0;  // metrics.jsonl lines that could not be read
};

// Every run directory under `log_dir` (one holding run.json, config.yaml or metrics.jsonl), newest first
// (by start time, then by name). Throws UsageError when `log_dir` is not a directory.
std::vector<RunSummary> list_runs(const std::string& log_dir, double now_unix_seconds);
// One run directory's summary.
RunSummary summarize_run(const std::string& run_id, const std::string& directory, double now_unix_seconds);

// "eval.accuracy 0.8612 @2000" ("-" without one), as `mgtrain runs` and `mgtrain status` show it.
std::string best_metric_text(const std::optional<BestMetric>& best);
// Unix seconds as the local time, "2026-11-22 03:50:12".
std::string local_time_text(double unix_seconds);

// The run directory `run` names: <log_dir>/<run> when that is a directory, else `run` itself when it is a
// directory. Throws UsageError naming the run and listing the runs that exist under `log_dir`.
std::string resolve_run_directory(const std::string& run, const std::string& log_dir);

}  // namespace mgtrain
