// Formatting the failure report as text and JSON.
#include "supervise/failure_report.hpp"

#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "util/json_writer.hpp"
#include "contract/log_layout.hpp"

namespace mgtrain {
namespace {

std::string seconds_text(double seconds) {
  if (seconds >= 10 || std::fabs(seconds - std::round(seconds)) < 0.05) return fmt::format("{:.0f} s", seconds);
  return fmt::format("{:.1f} s", seconds);
}

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

void write_worker(JsonWriter& json, const FailedWorker& worker) {
  json.begin_object();
  if (worker.node_rank >= 0 || worker.node_lost) {
    json.key("node_rank").value(worker.node_rank);
    json.key("node").value(worker.node);
    json.key("node_lost").value(worker.node_lost);
  }
  json.key("global_rank").value(worker.global_rank);
  json.key("local_rank").value(worker.local_rank);
  json.key("attempt").value(worker.attempt);
  json.key("host").value(worker.host);
  json.key("pid").value(static_cast<long long>(worker.pid));
  json.key("outcome").value(worker.outcome());
  json.key("exit_code");
  if (worker.hung) json.null(); else json.value(worker.status.as_exit_code());
  json.key("signal");
  if (!worker.hung && worker.status.signaled) json.value(worker.status.value); else json.null();
  json.key("signal_name");
  if (!worker.hung && worker.status.signaled) json.value(signal_name(worker.status.value)); else json.null();
  json.key("hung").value(worker.hung);
  json.key("silent_s");
  if (worker.hung) json.value(worker.silent_s); else json.null();
  json.key("time").value(worker.time_utc);
  json.key("during_teardown").value(worker.during_teardown);
  json.key("stderr_log").value(worker.stderr_log);
  json.key("stderr_tail").begin_array();
  for (const std::string& line : worker.stderr_tail) json.value(line);
  json.end_array();
  json.key("error_file");
  if (!worker.error_file && !worker.error_message.empty()) {
    json.begin_object();
    json.key("message").value(worker.error_message);
    json.key("traceback").value("");
    json.key("timestamp").value("");
    json.key("problem").null();
    json.end_object();
  } else if (!worker.error_file) {
    json.null();
  } else {
    const TorchErrorRecord& error = *worker.error_file;
    json.begin_object();
    json.key("message").value(error.message);
    json.key("traceback").value(error.traceback);
    json.key("timestamp").value(error.timestamp);
    json.key("problem");
    if (error.problem.empty()) json.null(); else json.value(error.problem);
    json.end_object();
  }
  json.end_object();
}

}  // namespace

std::string FailedWorker::outcome() const {
  if (node_lost) return node_problem;
  if (hung) return "no heartbeat for " + seconds_text(silent_s);
  return status.describe();
}

std::string format_utc_timestamp(long long unix_millis) {
  std::time_t seconds = static_cast<std::time_t>(unix_millis / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:03d}Z", buffer, static_cast<int>(unix_millis % 1000));
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
  JsonWriter json;
  json.begin_object();
  json.key("schema").value("mgtrain.failure/1");
  json.key("run_id").value(report.run_id);
  json.key("run_dir").value(report.run_dir);
  json.key("exit_code").value(report.exit_code);
  json.key("attempt").value(report.attempt);
  json.key("max_restarts").value(report.max_restarts);
  json.key("root_cause");
  write_worker(json, report.root_cause);
  json.key("other_failures").begin_array();
  for (const FailedWorker& worker : report.other_failures) write_worker(json, worker);
  json.end_array();
  json.end_object();
  return json.text() + "\n";
}

}  // namespace mgtrain
