// Formatting the failure report as text and JSON.
#include "supervise/failure_report.hpp"
#include "util/json_text.hpp"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contract/log_layout.hpp"
#include "diagnose/top_frames.hpp"
#include "util/strings.hpp"
#include "util/time_format.hpp"

namespace mgtrain {
namespace {

constexpr std::size_t kTopFrameLines = 4;  // of the root cause's top frames, in the table (all in failure.json)

void append_indented(std::string& out, const std::string& text, const std::string& indent) {
  for (const std::string& line : split_lines(text)) out += indent + line + '\n';
}

nlohmann::ordered_json error_file_json(const FailedWorker& worker) {
  if (!worker.error_file && !worker.error_message.empty()) {
    return {{"message", worker.error_message}, {"traceback", ""}, {"timestamp", ""}, {"problem", nullptr}};
  }
  if (!worker.error_file) return nullptr;
  const TorchErrorRecord& error = *worker.error_file;
  nlohmann::ordered_json problem = nullptr;
  if (!error.problem.empty()) problem = error.problem;
  return {
      {"message", error.message}, {"traceback", error.traceback}, {"timestamp", error.timestamp}, {"problem", problem}};
}

nlohmann::ordered_json worker_json(const FailedWorker& worker) {
  using nlohmann::ordered_json;
  const bool stalled = worker.hung || worker.waiting;  // stopped by the launcher after a hang: no exit of its own
  const bool signaled = !stalled && worker.status.signaled;
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
  json["exit_code"] = stalled ? ordered_json(nullptr) : ordered_json(worker.status.as_exit_code());
  json["signal"] = signaled ? ordered_json(worker.status.value) : ordered_json(nullptr);
  json["signal_name"] = signaled ? ordered_json(signal_name(worker.status.value)) : ordered_json(nullptr);
  json["hung"] = worker.hung;
  json["waiting"] = worker.waiting;
  json["silent_s"] = stalled ? ordered_json(worker.silent_s) : ordered_json(nullptr);
  json["last_step"] = stalled && worker.last_step ? ordered_json(*worker.last_step) : ordered_json(nullptr);
  json["last_progress_time"] =
      stalled && !worker.last_progress_utc.empty() ? ordered_json(worker.last_progress_utc) : ordered_json(nullptr);
  json["process_stopped"] = worker.process_stopped;
  json["stacks"] = worker.stacks.empty() ? ordered_json(nullptr) : ordered_json(worker.stacks);
  json["top_frames"] = worker.top_frames;
  json["time"] = worker.time_utc;
  json["during_teardown"] = worker.during_teardown;
  json["stderr_log"] = worker.stderr_log;
  json["stderr_tail"] = worker.stderr_tail;
  json["error_file"] = error_file_json(worker);
  json["expired_timer"] = worker.expired_timer_scope.empty() ? ordered_json(nullptr)
                                                             : ordered_json{{"scope_id", worker.expired_timer_scope},
                                                                            {"pid", worker.expired_timer_pid}};
  json["hint"] = worker.hint.empty() ? ordered_json(nullptr) : ordered_json(worker.hint);
  return json;
}

// torch's exit code convention (ProcessFailure.exitcode): -N for signal N.
int torch_exit_code(const FailedWorker& worker) {
  return worker.status.signaled ? -worker.status.value : worker.status.value;
}

std::string error_file_path(const FailedWorker& worker) {
  if (!worker.error_file || worker.stderr_log.empty()) return "<N/A>";
  return log_layout::error_file(worker.stderr_log.substr(0, worker.stderr_log.rfind('/')));
}

// One entry of torch's ChildFailedError text (_FAILURE_FORMAT_TEMPLATE).
std::string torch_failure_text(std::size_t index, const FailedWorker& worker) {
  std::string signal = worker.status.signaled ? " (" + signal_name(worker.status.value) + ")" : "";
  std::string message =
      worker.error_file && worker.error_file->problem.empty()
          ? (worker.error_file->traceback.empty() ? worker.error_file->message : worker.error_file->traceback)
          : worker.outcome();
  std::string indented;
  append_indented(indented, message, "  ");
  if (!indented.empty()) indented = indented.substr(2, indented.size() - 3);  // first line follows the label
  return fmt::format(
      "[{}]:\n  time      : {}\n  host      : {}\n  rank      : {} (local_rank: {})\n"
      "  exitcode  : {} (pid: {}){}\n  error_file: {}\n  traceback : {}",
      index, worker.time_utc, worker.host, worker.global_rank, worker.local_rank, torch_exit_code(worker), worker.pid,
      signal, error_file_path(worker), indented);
}

std::string child_failed_text(const FailureReport& report) {
  const std::string title = report.run_id + " FAILED";
  const std::string border(60, '='), section(60, '-');
  std::string others;
  for (std::size_t index = 0; index < report.other_failures.size(); ++index) {
    others += (index ? "\n" : "") + torch_failure_text(index + 1, report.other_failures[index]);
  }
  if (others.empty()) others = "  <NO_OTHER_FAILURES>";
  return "\n" + border + "\n" + title + "\n" + section + "\nFailures:\n" + others + "\n" + section +
         "\nRoot Cause (first observed failure):\n" + torch_failure_text(0, report.root_cause) + "\n" + border;
}

}  // namespace

std::string launcher_error_file_json(const FailureReport& report,
                                     const std::optional<std::string>& root_cause_error_text,
                                     long long now_unix_seconds) {
  using nlohmann::ordered_json;
  ordered_json root;
  if (root_cause_error_text) {
    root = ordered_json::parse(*root_cause_error_text, nullptr, false);
    if (!root.is_object() || !root.contains("message")) root = nullptr;
  }
  const int code = torch_exit_code(report.root_cause);
  if (root.is_null()) {
    root = ordered_json::object();
    root["message"] = {
        {"message", "ChildFailedError: " + child_failed_text(report)},
        {"extraInfo", {{"py_callstack", child_failed_text(report)}, {"timestamp", std::to_string(now_unix_seconds)}}},
        {"errorCode", code}};
  } else if (root["message"].is_object() && code != 0) {
    root["message"]["errorCode"] = code;  // torch's override_error_code_in_rootcause_data
  }
  ordered_json others = ordered_json::array();
  for (const FailedWorker& worker : report.other_failures) {
    ordered_json entry = ordered_json::object();
    entry["rank"] = worker.global_rank;
    entry["local_rank"] = worker.local_rank;
    entry["exitcode"] = torch_exit_code(worker);
    entry["pid"] = static_cast<long long>(worker.pid);
    entry["time"] = worker.time_utc;
    entry["failure"] = worker.outcome();
    entry["error_file"] = error_file_path(worker);
    entry["message"] = worker.error_file ? ordered_json(worker.error_file->message) : ordered_json(nullptr);
    entry["during_teardown"] = worker.during_teardown;
    others.push_back(std::move(entry));
  }
  root["other_failures"] = std::move(others);
  return json_text(root, -1);
}

std::string FailedWorker::outcome() const {
  if (node_lost) return node_problem;
  if (hung || waiting) {
    return fmt::format("{}: no progress for {}{}{}", hung ? "hung" : "waiting", format_seconds(silent_s),
                       last_step ? fmt::format(" (last step {})", *last_step) : "",
                       process_stopped ? ", its process stopped (SIGSTOP)" : "");
  }
  if (!expired_timer_scope.empty()) {
    return status.describe() + ", sent by the launcher: file timer \"" + expired_timer_scope + "\" expired (pid " +
           std::to_string(expired_timer_pid) + ")";
  }
  return status.describe();
}

std::string failure_summary_line(const FailureReport& report, std::size_t limit) {
  const FailedWorker& cause = report.root_cause;
  std::string line = fmt::format("mgtrain: run {} failed (exit code {}): ", report.run_id, report.exit_code);
  if (cause.node_lost) {
    line += cause.node + ": " + cause.outcome();
  } else {
    line += fmt::format("rank {} (local rank {}) on {}: {}", cause.global_rank, cause.local_rank,
                        cause.node.empty() ? cause.host : cause.node, cause.outcome());
    std::string said;
    if (cause.error_file && cause.error_file->problem.empty()) said = cause.error_file->message;
    if (said.empty()) said = cause.error_message;
    if (said.empty() && !cause.stderr_tail.empty()) said = cause.stderr_tail.back();
    said = said.substr(0, said.find('\n'));
    if (!said.empty()) line += ": " + said;
  }
  return cut_with_ellipsis(escape_control_characters(line), limit);
}

std::string format_failure_report(const FailureReport& report) {
  const FailedWorker& cause = report.root_cause;
  std::string out;
  std::string rule(72, '=');
  out += rule + "\n";
  const std::string port_retries = report.port_retries > 0 ? fmt::format(" after {} port {}", report.port_retries,
                                                                         report.port_retries == 1 ? "retry" : "retries")
                                                           : "";
  out += fmt::format("mgtrain: job failed (run {}, attempt {} of {}{}, exit code {})\n", report.run_id,
                     report.attempt - report.port_retries + 1, report.max_restarts + 1, port_retries, report.exit_code);
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
    if (!cause.last_progress_utc.empty()) out += fmt::format("  progress   last report {}\n", cause.last_progress_utc);
    if (!cause.stacks.empty()) out += fmt::format("  stacks     {}\n", cause.stacks);
    for (std::size_t i = 0; i < cause.top_frames.size() && i < kTopFrameLines; ++i) {
      out += fmt::format("  {}{}\n", i == 0 ? "frames     " : "           ", cause.top_frames[i]);
    }
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
  if (!cause.hint.empty()) out += fmt::format("  hint       {}\n", cause.hint);
  if (cause.node_lost) {
    // no worker, no stderr
  } else if (cause.stderr_tail.empty()) {
    out += "  (nothing on stderr)\n";
  } else {
    out += fmt::format("  last {} line{} of stderr:\n", cause.stderr_tail.size(),
                       cause.stderr_tail.size() == 1 ? "" : "s");
    for (const std::string& line : cause.stderr_tail) out += "    | " + line + "\n";
  }
  if (!report.other_failures.empty()) {
    out += std::string(72, '-') + "\n";
    out += "Other failures:\n";
    for (const FailedWorker& worker : report.other_failures) {
      out += fmt::format("  rank {} (local rank {}) on {}, pid {}: {} at {}{}\n", worker.global_rank, worker.local_rank,
                         worker.node.empty() ? worker.host : worker.node, worker.pid, worker.outcome(), worker.time_utc,
                         worker.during_teardown ? " (while the group was being stopped)" : "");
    }
  }
  // A hang: where every stalled rank is, ranks with identical top frames together (31 ranks waiting in one all-reduce
  // are one line, the hung rank another).
  std::vector<std::pair<int, std::vector<std::string>>> stalled;
  if (!cause.node_lost && !cause.top_frames.empty()) stalled.emplace_back(cause.global_rank, cause.top_frames);
  for (const FailedWorker& worker : report.other_failures) {
    if (!worker.top_frames.empty()) stalled.emplace_back(worker.global_rank, worker.top_frames);
  }
  if (stalled.size() >= 2) {
    const std::vector<diagnose::FrameGroup> groups = diagnose::group_by_top_frames(stalled);
    out += std::string(72, '-') + "\n";
    out += fmt::format("Where the ranks are ({} place{}; identical top frames together):\n", groups.size(),
                       groups.size() == 1 ? "" : "s");
    for (const std::string& line : diagnose::frame_group_lines(groups, "  ")) out += "  " + line + "\n";
  }
  out += std::string(72, '-') + "\n";
  out += fmt::format("Logs: {}/  Report: {}\n", log_layout::attempt_dir(report.run_dir, report.attempt),
                     log_layout::failure_json(report.run_dir));
  out += rule + "\n";
  return out;
}

std::string missing_torch_hint(const std::string& stderr_text, double seconds_after_start,
                               const std::string& python_path, const std::string& python_source) {
  if (python_path.empty() || seconds_after_start < 0 || seconds_after_start > kQuickFailureSeconds) return "";
  if (stderr_text.find("ModuleNotFoundError: No module named 'torch'") == std::string::npos) return "";
  return "the interpreter " + python_path + " (chosen by " + python_source +
         ") cannot import torch: choose another with --python PATH, PYTHON_EXEC=PATH or launch.python";
}

bool says_address_in_use(const std::vector<std::string>& stderr_lines) {
  for (const std::string& line : stderr_lines) {
    for (const char* words : {"EADDRINUSE", "address already in use", "Address already in use"}) {
      if (line.find(words) != std::string::npos) return true;
    }
  }
  return false;
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
