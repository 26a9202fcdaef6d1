// `mgtrain runs [--log-dir DIR] [--json]`: the run history, newest first — id, status, start, duration, steps
// and the best evaluation metric (eval.accuracy's maximum, else eval.loss's minimum). docs/monitoring.md#run-history
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "contract/log_layout.hpp"
#include "observe/run_history.hpp"
#include "util/error.hpp"
#include "util/json_text.hpp"
#include "util/log.hpp"
#include "util/time_format.hpp"

namespace mgtrain {
namespace {

using Json = nlohmann::ordered_json;

// Seconds to the millisecond, or null.
Json seconds_or_null(const std::optional<double>& value) { return value ? json_seconds(*value) : Json(nullptr); }

std::string runs_to_json(const std::vector<RunSummary>& runs) {
  Json out = Json::array();
  for (const RunSummary& r : runs) {
    Json run = Json::object();
    run["run_id"] = r.run_id;
    run["directory"] = r.directory;
    run["status"] = r.status;
    run["exit_code"] = r.record && r.record->exit_code ? Json(*r.record->exit_code) : Json(nullptr);
    run["start_time"] = seconds_or_null(r.start_time);
    run["end_time"] = seconds_or_null(r.record ? r.record->end_time : std::nullopt);
    run["duration_s"] = seconds_or_null(r.duration_s);
    run["attempts"] = r.record ? Json(r.record->attempts) : Json(nullptr);
    run["world_size"] = r.record ? Json(r.record->world_size) : Json(nullptr);
    run["steps"] = r.steps ? Json(*r.steps) : Json(nullptr);
    if (r.best) {
      run["best"] = Json::object({{"metric", r.best->metric}, {"value", r.best->value}, {"step", r.best->step}});
    } else {
      run["best"] = nullptr;
    }
    if (!r.record_problem.empty()) run["problem"] = r.record_problem;
    out.push_back(std::move(run));
  }
  return json_text(out, 2) + "\n";
}

void print_table(const std::vector<RunSummary>& runs) {
  std::vector<std::vector<std::string>> rows = {{"RUN ID", "STATUS", "STARTED", "DURATION", "STEPS", "BEST"}};
  for (const RunSummary& r : runs) {
    std::string status = r.status;
    if (r.record && r.record->exit_code && *r.record->exit_code != 0)
      status += fmt::format(" ({})", *r.record->exit_code);
    rows.push_back({r.run_id, status, r.start_time ? local_time_text(*r.start_time) : "-",
                    r.duration_s ? format_duration(*r.duration_s, DurationPrecision::Tenths) : "-",
                    r.steps ? std::to_string(*r.steps) : "-", best_metric_text(r.best)});
  }
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace

int run_runs_command(const RunsRequest& request) {
  const std::string log_dir = request.log_dir.empty() ? log_layout::default_log_dir() : request.log_dir;
  const std::vector<RunSummary> runs = list_runs(log_dir, unix_seconds_now());
  for (const RunSummary& r : runs) {
    if (!r.record_problem.empty()) log::warn("{}", r.record_problem);
  }
  if (request.json) {
    std::fputs(runs_to_json(runs).c_str(), stdout);
    return exit_code::kSuccess;
  }
  if (runs.empty()) {
    std::printf("no runs in %s\n", log_dir.c_str());
    return exit_code::kSuccess;
  }
  print_table(runs);
  std::printf("\n%zu run%s in %s; BEST: eval.accuracy's maximum, else eval.loss's minimum (@ its step)\n", runs.size(),
              runs.size() == 1 ? "" : "s", log_dir.c_str());
  return exit_code::kSuccess;
}

}  // namespace mgtrain
