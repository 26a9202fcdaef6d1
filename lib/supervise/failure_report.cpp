// Formatting the failure report as text and JSON.
#include "supervise/failure_report.hpp"
#include "util/json_text.hpp"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contract/log_layout.hpp"
#include "util/time_format.hpp"

namespace mgtrain {
namespace {

void append_indented(std::string& out, const std::string& text, const std::string& indent) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += indent;
    out.append(text, start, end - start);
    out += '\n';
    start = end + 1;
  }
}

nlohmann::ordered_json error_file_json(const FailedWorker& worker) {
  if (!worker.error_file && !worker.error_message.empty()) {
    return {{"message", worker.error_message}, {"traceback", ""}, {"timestamp", ""}, {"problem", nullptr}};
  }
  if (!worker.error_file) return nullptr;
  const TorchErrorRecord& error = *worker.error_file;
  nlohmann::ordered_json problem = nullptr;
  if (!error.problem.empty()) problem = error.problem;
  return {{"message", error.message}, {"traceback", error.traceback}, {"timestamp", error.timestamp}, {"problem", problem}};
}

nlohmann::ordered_json worker_json(const FailedWorker& worker) {
  using nlohmann::ordered_json;
  const bool signaled = !worker.hung && worker.status.signaled;
  ordered_json json = ordered_json::object();
  if (worker.node_rank >= 0 || worker.node_lost) {
    json["node_rank"] = worker.node_rank;
    json["node"] = worker.node;
    json["node_lost"] = worker.node_lost;
  }
  json["global_rank"] = worker.global_rank;
  json["local_rank"] = worker.local_rank;
  json["attempt"] = worker.attempt;
  json["host"] = worker.host;
  json["pid"] = static_cast<long long>(worker.pid);
  json["outcome"] = worker.outcome();
  json["exit_code"] = worker.hung ? ordered_json(nullptr) : ordered_json(worker.status.as_exit_code());
  json["signal"] = signaled ? ordered_json(worker.status.value) : ordered_json(nullptr);
  json["signal_name"] = signaled ? ordered_json(signal_name(worker.status.value)) : ordered_json(nullptr);
  json["hung"] = worker.hung;
  json["silent_s"] = worker.hung ? ordered_json(worker.silent_s) : ordered_json(nullptr);
  json["time"] = worker.time_utc;
  json["during_teardown"] = worker.during_teardown;
  json["stderr_log"] = worker.stderr_log;
  json["stderr_tail"] = worker.stderr_tail;
  json["error_file"] = error_file_json(worker);
  return json;
}

}  // namespace

std::string FailedWorker::outcome() const {
  if (node_lost) return node_problem;
  if (hung) return "no heartbeat for " + format_seconds(silent_s);
  return status.describe();
}

std::string format_failure_report(const FailureReport& report) {
  const FailedWorker& cause = report.root_cause;
  std::string out;
  std::string rule(72, '=');
  out += rule + "\n";
  out += fmt::format("mgtrain: job failed (run {}, attempt {} of {}, exit code {})\n", report.run_id,
                     report.attempt + 1, report.max_restarts + 1, report.exit_code);
  out += rule + "\n";
  out += "Root cause (first failure):\n";
  if (cause.node_lost) {
    out += fmt::format("  node       {}\n", cause.node);
    out += fmt::format("  failure    {}\n", cause.outcome());
    if (!cause.time_utc.empty()) out += fmt::format("  time       {}\n", cause.time_utc);
  } else {
    out += fmt::format("  rank       {} (local rank {}) on {}\n", cause.global_rank, cause.local_rank,
                       cause.node.empty() ? cause.host : cause.node);
    out += fmt::format("  pid        {}\n", cause.pid);
    out += fmt::format("  failure    {}\n", cause.outcome());
    out += fmt::format("  time       {}\n", cause.time_utc);
    out += fmt::format("  stderr     {}{}\n", cause.stderr_log, cause.node_rank >= 0 ? " (on " + cause.host + ")" : "");
    if (!cause.error_file && !cause.error_message.empty()) out += fmt::format("  error      {}\n", cause.error_message);
  }
  if (cause.error_file) {
    const TorchErrorRecord& error = *cause.error_file;
    if (!error.problem.empty()) {
      out += fmt::format("  error file could not be read: {}\n", error.problem);
    } else {
      out += fmt::format("  error      {}\n", error.message);
      if (!error.traceback.empty()) {
        out += "  traceback (from TORCHELASTIC_ERROR_FILE):\n";
        append_indented(out, error.traceback, "    ");
      }
    }
  }
  if (cause.node_lost) {
    // no worker, no stderr
  } else if (cause.stderr_tail.empty()) {
    out += "  (nothing on stderr)\n";
  } else {
    out += fmt::format("  last {} line{} of stderr:\n", cause.stderr_tail.size(), cause.stderr_tail.size() == 1 ? "" : "s");
    for (const std::string& line : cause.stderr_tail) out += "    | " + line + "\n";
  }
  if (!report.other_failures.empty()) {
    out += std::string(72, '-') + "\n";
    out += "Other failures:\n";
    for (const FailedWorker& worker : report.other_failures) {
      out += fmt::format("  rank {} (local rank {}) on {}, pid {}: {} at {}{}\n", worker.global_rank,
                         worker.local_rank, worker.node.empty() ? worker.host : worker.node, worker.pid, worker.outcome(), worker.time_utc,
                         worker.during_teardown ? " (while the group was being stopped)" : "");
    }
  }
  out += std::string(72, '-') + "\n";
  out += fmt::format("Logs: {}/  Report: {}\n", log_layout::attempt_dir(report.run_dir, report.attempt),
                     log_layout::failure_json(report.run_dir));
  out += rule + "\n";
  return out;
}

std::string failure_report_to_json(const FailureReport& report) {
  nlohmann::ordered_json json;
  json["schema"] = "mgtrain.failure/1";
  json["run_id"] = report.run_id;
  json["run_dir"] = report.run_dir;
  json["exit_code"] = report.exit_code;
  json["attempt"] = report.attempt;
  json["max_restarts"] = report.max_restarts;
  json["root_cause"] = worker_json(report.root_cause);
  json["other_failures"] = nlohmann::ordered_json::array();
  for (const FailedWorker& worker : report.other_failures) json["other_failures"].push_back(worker_json(worker));
  // Invalid UTF-8 (a worker's stderr) becomes U+FFFD, so the file is always valid JSON.
  return json_text(json, 2) + "\n";
}

}  // namespace mgtrain
