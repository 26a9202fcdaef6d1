// Summarises and finds run directories (see run_history.hpp).
#include "observe/run_history.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "contract/log_layout.hpp"
#include "observe/metrics_reader.hpp"
#include "util/did_you_mean.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace fs = std::filesystem;
namespace {

bool is_run_directory(const fs::path& dir) {
  std::error_code error;
  return fs::is_regular_file(log_layout::run_json(dir.string()), error) ||
         fs::is_regular_file(log_layout::config_file(dir.string()), error) ||
         fs::is_regular_file(log_layout::metrics_jsonl(dir.string()), error);
}

std::optional<double> modification_time(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return static_cast<double>(info.st_mtim.tv_sec) + static_cast<double>(info.st_mtim.tv_nsec) * 1e-9;
}

std::optional<BestMetric> best_of(const MetricsLog& log) {
  for (const char* metric : {"eval.accuracy", "eval.loss"}) {
    const bool maximise = std::string(metric) == "eval.accuracy";
    std::optional<BestMetric> best;
    for (const MetricPoint& point : log.series(metric)) {
      if (!std::isfinite(point.value)) continue;
      if (!best || (maximise ? point.value > best->value : point.value < best->value))
        best = BestMetric{metric, point.value, point.step};
    }
    if (best) return best;
  }
  return std::nullopt;
}

std::optional<double> last_row_time(const MetricsLog& log) {
  std::optional<double> last;
  for (const MetricsRow& row : log.rows()) {
    if (auto time = row.value("time"); time && (!last || *time > *last)) last = time;
  }
  return last;
}

std::vector<std::string> run_names(const std::string& log_dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(log_dir, error)) {
    if (entry.is_directory(error) && is_run_directory(entry.path())) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

RunSummary summarize_run(const std::string& run_id, const std::string& directory, double now_unix_seconds) {
  RunSummary s;
  s.run_id = run_id;
  s.directory = directory;
  try {
    s.record = read_run_record(directory);
  } catch (const Error& e) {
    s.record_problem = e.what();
  }
  const MetricsLog metrics = read_metrics_file(log_layout::metrics_jsonl(directory));
  s.metrics_problems = metrics.problem_count();
  s.steps = metrics.last_step();
  s.best = best_of(metrics);
  if (s.record) {
    s.status = effective_status(*s.record);
    s.start_time = s.record->start_time;
    if (s.record->end_time) {
      s.duration_s = *s.record->end_time - s.record->start_time;
    } else if (s.status == "running") {
      s.duration_s = now_unix_seconds - s.record->start_time;
    } else if (auto last = last_row_time(metrics); last && *last >= s.record->start_time) {
      s.duration_s = *last - s.record->start_time;  // interrupted: at least until its last metrics row
    }
  } else {
    s.status = s.record_problem.empty() ? "unknown" : "unreadable";
    s.start_time = modification_time(log_layout::config_file(directory));
  }
  return s;
}

std::string best_metric_text(const std::optional<BestMetric>& best) {
  if (!best) return "-";
  return fmt::format("{} {:.4g} @{}", best->metric, best->value, best->step);
}

std::string local_time_text(double unix_seconds) {
  const auto seconds = static_cast<std::time_t>(unix_seconds);
  std::tm parts{};
  localtime_r(&seconds, &parts);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S", &parts);
  return buffer;
}

std::vector<RunSummary> list_runs(const std::string& log_dir, double now_unix_seconds) {
  std::error_code error;
  if (!fs::is_directory(log_dir, error)) {
    throw UsageError(
        fmt::format("no log directory {}: runs are kept where `mgtrain launch` put them (launch.log_dir, "
                    "default runs/ under the directory it ran in); give it with --log-dir",
                    log_dir));
  }
  std::vector<RunSummary> runs;
  for (const std::string& name : run_names(log_dir))
    runs.push_back(summarize_run(name, (fs::path(log_dir) / name).string(), now_unix_seconds));
  std::stable_sort(runs.begin(), runs.end(), [](const RunSummary& a, const RunSummary& b) {
    return a.start_time.value_or(0) > b.start_time.value_or(0);
  });
  return runs;
}

std::string resolve_run_directory(const std::string& run, const std::string& log_dir) {
  std::error_code error;
  const fs::path under_log_dir = fs::path(log_dir) / run;
  if (run.find('/') == std::string::npos && fs::is_directory(under_log_dir, error)) return under_log_dir.string();
  if (fs::is_directory(run, error)) return run;
  const std::vector<std::string> names = run_names(log_dir);
  std::string known;
  if (!fs::is_directory(log_dir, error)) {
    known = fmt::format("there is no log directory {} either (give it with --log-dir)", log_dir);
  } else if (names.empty()) {
    known = fmt::format("{} holds no runs", log_dir);
  } else {
    const std::size_t shown = std::min<std::size_t>(names.size(), 20);
    std::string list;
    for (std::size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + names[i];
    if (shown < names.size()) list += fmt::format(" and {} more (mgtrain runs)", names.size() - shown);
    known = fmt::format("runs in {}: {}", log_dir, list);
  }
  throw UsageError(fmt::format("unknown run '{}'{}: neither {} nor {} is a directory; {}", run,
                               did_you_mean_suffix(run, names), under_log_dir.string(), run, known));
}

}  // namespace mgtrain
