// `mgtrain runs [--log-dir DIR] [--json]`: the run history, newest first — id, status, start, duration, steps
// and the best evaluation metric (eval.accuracy's maximum, else eval.loss's minimum). docs/monitoring.md#run-history
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "util/error.hpp"
#include "util/json_writer.hpp"
#include "observe/run_history.hpp"

namespace mgtrain {
namespace {

std::string local_time_text(double unix_seconds) {
  const std::time_t seconds = static_cast<std::time_t>(unix_seconds);
  std::tm parts{};
  localtime_r(&seconds, &parts);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S", &parts);
  return buffer;
}

std::string duration_text(double seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const long long whole = static_cast<long long>(seconds);
  if (whole < 3600) return fmt::format("{}m{:02}s", whole / 60, whole % 60);
  if (whole < 86400) return fmt::format("{}h{:02}m", whole / 3600, (whole % 3600) / 60);
  return fmt::format("{}d{:02}h", whole / 86400, (whole % 86400) / 3600);
}

std::string best_text(const std::optional<BestMetric>& best) {
  if (!best) return "-";
  return fmt::format("{} {:.4g} @{}", best->metric, best->value, best->step);
}

std::string json_number_or_null(const std::optional<double>& value, int decimals) {
  if (!value || !std::isfinite(*value)) return "null";
  return fmt::format("{:.{}f}", *value, decimals);
}

std::string runs_to_json(const std::vector<RunSummary>& runs) {
  std::string out = "[";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunSummary& r = runs[i];
    out += i ? ",\n " : "\n ";
    out += "{\"run_id\": " + json_quote(r.run_id) + ", \"directory\": " + json_quote(r.directory) + ", \"status\": " + json_quote(r.status);
    out += ", \"exit_code\": " + (r.record && r.record->exit_code ? std::to_string(*r.record->exit_code) : std::string("null"));
    out += ", \"start_time\": " + json_number_or_null(r.start_time, 3);
    out += ", \"end_time\": " + json_number_or_null(r.record ? r.record->end_time : std::nullopt, 3);
    out += ", \"duration_s\": " + json_number_or_null(r.duration_s, 3);
    out += ", \"attempts\": " + (r.record ? std::to_string(r.record->attempts) : std::string("null"));
    out += ", \"world_size\": " + (r.record ? std::to_string(r.record->world_size) : std::string("null"));
    out += ", \"steps\": " + (r.steps ? std::to_string(*r.steps) : std::string("null"));
    out += ", \"best\": ";
    if (r.best) {
      out += fmt::format("{{\"metric\": {}, \"value\": {:.17g}, \"step\": {}}}", json_quote(r.best->metric), r.best->value, r.best->step);
    } else {
      out += "null";
    }
    if (!r.record_problem.empty()) out += ", \"problem\": " + json_quote(r.record_problem);
    out += "}";
  }
  out += runs.empty() ? "]\n" : "\n]\n";
  return out;
}

void print_table(const std::vector<RunSummary>& runs) {
  std::vector<std::vector<std::string>> rows = {{"RUN ID", "STATUS", "STARTED", "DURATION", "STEPS", "BEST"}};
  for (const RunSummary& r : runs) {
    std::string status = r.status;
    if (r.record && r.record->exit_code && *r.record->exit_code != 0) status += fmt::format(" ({})", *r.record->exit_code);
    rows.push_back({r.run_id, status, r.start_time ? local_time_text(*r.start_time) : "-",
                    r.duration_s ? duration_text(*r.duration_s) : "-", r.steps ? std::to_string(*r.steps) : "-", best_text(r.best)});
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
  const std::string log_dir = request.log_dir.empty() ? default_log_dir() : request.log_dir;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::vector<RunSummary> runs = list_runs(log_dir, now);
  for (const RunSummary& r : runs) {
    if (!r.record_problem.empty()) std::fprintf(stderr, "mgtrain: warning: %s\n", r.record_problem.c_str());
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
