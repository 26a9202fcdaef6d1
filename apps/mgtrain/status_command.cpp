// `mgtrain status [RUN] [--log-dir DIR] [--json] [--stacks]`: a run's live state for humans. A run whose run.json
// says it has ended (or whose launcher is gone) gets a summary of its record and files, without asking anyone;
// otherwise it reads the endpoint the launcher wrote to <run dir>/status_endpoint and asks its /status, and
// without an answer says so and shows what the run's files say (heartbeats, the last metrics).
// docs/monitoring.md#status-api-and-dashboard. With --stacks: POST /stacks with the run's token, then each rank's
// stacks file and top frames, or an error with its own exit code (docs/diagnosis.md, docs/exit-codes.md).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "contract/log_layout.hpp"
#include "diagnose/top_frames.hpp"
#include "observe/metrics_reader.hpp"
#include "observe/run_history.hpp"
#include "observe/run_record.hpp"
#include "observe/status_server.hpp"
#include "observe/status_snapshot.hpp"
#include "observe/status_stacks.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/strings.hpp"
#include "util/time_format.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// The file's text, "" when it cannot be read (absent: the run has not written it).
std::string file_text(const fs::path& path) { return try_read_file(path.string()).value_or(""); }

// object[key], or null when the key is missing (or `object` is not an object).
const Json& field(const Json& object, const char* key) {
  static const Json kNull;
  if (!object.is_object()) return kNull;
  const auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

// The run directory: RUN under the log directory, or RUN itself, or the newest run (by config.yaml's time).
fs::path find_run_directory(const StatusRequest& request) {
  const fs::path log_dir = request.log_dir.empty() ? log_layout::default_log_dir() : request.log_dir;
  std::error_code error;
  if (!request.run.empty()) {
    if (fs::is_directory(log_dir / request.run, error)) return log_dir / request.run;
    if (fs::is_directory(request.run, error)) return request.run;
    throw UsageError("no run '" + request.run + "' under " + log_dir.string() +
                     ": give a run id under the log directory (--log-dir) or the path of a run directory");
  }
  if (!fs::is_directory(log_dir, error)) {
    throw UsageError("no log directory " + log_dir.string() + ": give --log-dir DIR (launch.log_dir of the run)");
  }
  fs::path newest;
  fs::file_time_type newest_time{};
  for (const fs::directory_entry& entry : fs::directory_iterator(log_dir, error)) {
    const fs::path config = log_layout::config_file(entry.path().string());
    if (!fs::exists(config, error)) continue;
    const fs::file_time_type time = fs::last_write_time(config, error);
    if (!error && (newest.empty() || time > newest_time)) {
      newest = entry.path();
      newest_time = time;
    }
  }
  if (newest.empty())
    throw UsageError("no runs under " + log_dir.string() + ": give --log-dir DIR (launch.log_dir of the run)");
  return newest;
}

std::string text_or_dash(const Json& value, int decimals = -1) {
  if (value.is_null()) return "-";
  if (value.is_string()) return value.get<std::string>();
  if (decimals < 0 || !value.is_number()) return value.dump();
  return fmt::format("{:.{}f}", value.get<double>(), decimals);
}

std::string bytes_text(const Json& node) {
  if (!node.is_number()) return "-";
  double value = node.get<double>();
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

void print_live(const Json& s, const std::string& endpoint) {
  const int attempt = s.at("attempt").get<int>();
  std::printf("run %s: %s, attempt %d of %d (restarts %d), %s node %d\nstatus API http://%s/  run directory %s\n\n",
              s.at("run_id").get<std::string>().c_str(), s.at("phase").get<std::string>().c_str(), attempt + 1,
              s.at("max_restarts").get<int>() + 1, s.at("restarts").get<int>(),
              s.at("hostname").get<std::string>().c_str(), s.at("node_rank").get<int>(), endpoint.c_str(),
              s.at("run_dir").get<std::string>().c_str());
  const bool job = field(s, "scope").is_string() && field(s, "scope").get<std::string>() == "job";
  if (job) {
    std::printf("every rank of the job's %s nodes (this is the node that hosts the rendezvous)\n\n",
                text_or_dash(field(s, "nodes")).c_str());
  } else if (field(s, "job_status_host").is_string()) {
    std::printf("this node's ranks; the job's status API is on the node that hosts the rendezvous (%s)\n\n",
                field(s, "job_status_host").get<std::string>().c_str());
  }
  // A job's table names each rank's node and host; one node's does not need to.
  const std::string node_header = job ? fmt::format("{:<5} {:<16} ", "node", "host") : "";
  const double now = s.at("time").get<double>();
  std::printf("%-5s %-5s %s%-8s %-8s %8s %10s %11s %6s %11s\n", "rank", "local", node_header.c_str(), "pid", "state",
              "step", "loss", "heartbeat", "CPU%", "RSS");
  for (const Json& r : s.at("ranks")) {
    const Json& last = field(r, "last_heartbeat");
    const std::string beat = last.is_number() ? fmt::format("{:.1f} s ago", now - last.get<double>()) : "-";
    const std::string node =
        job ? fmt::format("{:<5} {:<16} ", text_or_dash(field(r, "node_rank")), text_or_dash(field(r, "host"))) : "";
    std::printf("%-5s %-5s %s%-8s %-8s %8s %10s %11s %6s %11s\n", text_or_dash(field(r, "rank")).c_str(),
                text_or_dash(field(r, "local_rank")).c_str(), node.c_str(), text_or_dash(field(r, "pid")).c_str(),
                text_or_dash(field(r, "state")).c_str(), text_or_dash(field(r, "step")).c_str(),
                text_or_dash(field(r, "loss"), 4).c_str(), beat.c_str(),
                text_or_dash(field(r, "cpu_percent"), 0).c_str(), bytes_text(field(r, "rss_bytes")).c_str());
  }
  const Json& gpus = field(s, "gpus");
  if (gpus.empty()) {
    std::printf("\nGPUs: no statistics (no NVML on this machine)\n");
    return;
  }
  std::printf("\nGPUs (driver %s):\n", text_or_dash(field(s, "driver_version")).c_str());
  for (const Json& g : gpus) {
    std::printf("  %s %s: %s%% busy, memory %s / %s, %s C, %s W\n", text_or_dash(field(g, "index")).c_str(),
                text_or_dash(field(g, "name")).c_str(), text_or_dash(field(g, "utilization_percent")).c_str(),
                bytes_text(field(g, "memory_used_bytes")).c_str(), bytes_text(field(g, "memory_total_bytes")).c_str(),
                text_or_dash(field(g, "temperature_c")).c_str(), text_or_dash(field(g, "power_w"), 0).c_str());
  }
}

// The newest attempt's heartbeats, one line per rank directory; nothing when no rank wrote one (the run's workers
// got no progress file).
void print_heartbeats(const fs::path& run_dir) {
  std::error_code error;
  int attempt = -1;
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (const std::optional<int> number = log_layout::attempt_of(name)) attempt = std::max(attempt, *number);
  }
  if (attempt < 0) return;
  const fs::path attempt_dir = log_layout::attempt_dir(run_dir.string(), attempt);
  std::vector<std::string> lines;
  bool any = false;
  for (const fs::directory_entry& entry : fs::directory_iterator(attempt_dir, error)) {
    if (!entry.is_directory(error)) continue;
    const std::optional<HeartbeatInfo> beat =
        parse_heartbeat_line(file_text(log_layout::heartbeat_file(entry.path().string())));
    any = any || beat.has_value();
    lines.push_back(fmt::format("  {:<8} {}", entry.path().filename().string(),
                                beat ? fmt::format("step {} loss {} ({} ago)", beat->step,
                                                   beat->loss ? fmt::format("{:.4f}", *beat->loss) : "-",
                                                   format_duration(unix_seconds_now() - beat->time))
                                     : "no heartbeat"));
  }
  if (!any) return;
  // rank_2 before rank_10: shorter names first.
  std::sort(lines.begin(), lines.end(), [](const std::string& a, const std::string& b) {
    const std::size_t a_name = a.find(' ', 2), b_name = b.find(' ', 2);
    return a_name != b_name ? a_name < b_name : a < b;
  });
  std::printf("last heartbeats (attempt %d):\n", attempt + 1);
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
}

// The train rows' last step and loss, and the best evaluation: "step 40, loss 0.2311; best eval.accuracy 0.91 @40".
std::string metrics_text(const fs::path& run_dir, const std::optional<BestMetric>& best) {
  const MetricsLog metrics = read_metrics_file(log_layout::metrics_jsonl(run_dir.string()));
  const std::vector<MetricPoint> loss = metrics.series("loss");
  if (loss.empty() && !best) return "";
  std::string text = loss.empty() ? "" : fmt::format("step {}, loss {:.4f}", loss.back().step, loss.back().value);
  if (best) text += (text.empty() ? "" : "; best ") + best_metric_text(best);
  return text;
}

// What the run's files say, for a run whose launcher does not answer: run.json's outcome, the heartbeats, the
// metrics. Readable lines, no raw JSON.
void print_from_files(const fs::path& run_dir, const RunSummary& summary) {
  std::printf("run %s (from its files in %s)\n", run_dir.filename().c_str(), run_dir.c_str());
  if (!summary.record_problem.empty()) std::printf("run.json cannot be read: %s\n", summary.record_problem.c_str());
  if (summary.record) std::printf("run.json: status %s\n", summary.status.c_str());
  print_heartbeats(run_dir);
  const std::string metrics = metrics_text(run_dir, summary.best);
  if (!metrics.empty()) std::printf("last metrics: %s\n", metrics.c_str());
}

// A run that has ended (run.json says so, or its launcher is gone): its outcome and record, plainly.
void print_ended(const fs::path& run_dir, const RunSummary& summary) {
  const RunRecord& r = *summary.record;
  std::string outcome = summary.status;
  if (r.exit_code) outcome += fmt::format(", exit code {}", *r.exit_code);
  if (summary.status == "interrupted") {
    outcome += fmt::format(" (its launcher, pid {} on {}, is gone without recording an outcome)", r.launcher.pid,
                           r.launcher.host.empty() ? "this host" : r.launcher.host);
  }
  std::printf("run %s has ended: %s\n", r.run_id.empty() ? run_dir.filename().c_str() : r.run_id.c_str(),
              outcome.c_str());
  const auto row = [](const char* name, const std::string& value) { std::printf("  %-10s %s\n", name, value.c_str()); };
  row("started", local_time_text(r.start_time));
  if (r.end_time) {
    row("ended", fmt::format("{} (after {})", local_time_text(*r.end_time),
                             format_duration(*r.end_time - r.start_time, DurationPrecision::Tenths)));
  }
  row("attempts", std::to_string(r.attempts));
  const std::string hosts = r.hosts.empty() ? "" : fmt::format(" ({})", fmt::join(r.hosts, ", "));
  row("nodes", fmt::format("{}{}, world size {}", r.nnodes, hosts, r.world_size));
  const std::string metrics = metrics_text(run_dir, summary.best);
  if (!metrics.empty()) row("metrics", metrics);
  row("directory", run_dir.string());
  if (const std::string failure = log_layout::failure_json(run_dir.string()); fs::exists(failure))
    row("failure", failure);
  print_heartbeats(run_dir);
}

// `mgtrain status --stacks`'s exit codes besides 0, 1 and 2 (docs/exit-codes.md).
constexpr int kNotRunningExit = 3;   // no launcher answers, or no rank runs now
constexpr int kNoStatusApiExit = 4;  // the run was launched without --status-port
constexpr int kTokenExit = 5;        // status_token missing or unreadable, or refused
constexpr int kBusyExit = 6;         // another dump is being taken

void print_stacks(const Json& answer) {
  const Json& ranks = answer.at("ranks");
  std::set<int> nodes;  // a multi-node job's
  for (const Json& r : ranks) {
    if (field(r, "node_rank").is_number_integer()) nodes.insert(field(r, "node_rank").get<int>());
  }
  const std::string on_nodes =
      nodes.empty() ? std::string() : " on " + std::to_string(nodes.size()) + " node" + (nodes.size() == 1 ? "" : "s");
  std::printf("stacks of run %s, attempt %d: %zu rank%s%s dumped in %s s\n",
              text_or_dash(field(answer, "run_id")).c_str(), answer.at("attempt").get<int>() + 1, ranks.size(),
              ranks.size() == 1 ? "" : "s", on_nodes.c_str(), text_or_dash(field(answer, "seconds"), 2).c_str());
  // Where the ranks are, identical top frames grouped: 32 ranks stuck in 2 places read as 2 groups.
  std::vector<std::pair<int, std::vector<std::string>>> frames_by_rank;
  for (const Json& r : ranks) {
    std::vector<std::string> frames;
    const Json& top = field(r, "top_frames");
    if (top.is_array()) {
      for (const Json& frame : top) frames.push_back(text_or_dash(frame));
    }
    const Json& rank = field(r, "rank");
    frames_by_rank.emplace_back(rank.is_number_integer() ? rank.get<int>() : -1, std::move(frames));
  }
  const std::vector<diagnose::FrameGroup> groups = diagnose::group_by_top_frames(frames_by_rank);
  std::printf("\n%zu place%s (ranks with identical top frames together):\n", groups.size(),
              groups.size() == 1 ? "" : "s");
  for (const std::string& line : diagnose::frame_group_lines(groups, "  ")) std::printf("  %s\n", line.c_str());
  std::printf("\n");
  for (const Json& r : ranks) {
    // A multi-node job's: the rank's node and host, where its stacks file is.
    const std::string node =
        field(r, "node_rank").is_number_integer()
            ? "node " + text_or_dash(field(r, "node_rank")) + " on " + text_or_dash(field(r, "host")) + ", "
            : std::string();
    std::printf("rank %s (%slocal %s, pid %s): %s, %s\n", text_or_dash(field(r, "rank")).c_str(), node.c_str(),
                text_or_dash(field(r, "local_rank")).c_str(), text_or_dash(field(r, "pid")).c_str(),
                text_or_dash(field(r, "outcome")).c_str(), text_or_dash(field(r, "stacks_file")).c_str());
    const Json& notes = field(r, "notes");
    if (notes.is_array()) {
      for (const Json& note : notes) std::printf("  note: %s\n", text_or_dash(note).c_str());
    }
  }
  const Json& notes = field(answer, "notes");  // a multi-node job's nodes that did not dump
  if (notes.is_array()) {
    for (const Json& note : notes) std::printf("note: %s\n", text_or_dash(note).c_str());
  }
}

// POST /stacks to the run's launcher, then the answer printed (or as JSON).
int run_stacks(const fs::path& run_dir, bool json) {
  const std::string how_to_enable =
      "relaunch it with --status-port PORT (launch.status_port) to dump its stacks on demand; a job started with "
      "--hang-timeout S gets every rank's stacks.txt by itself when it hangs";
  const std::string endpoint = trim(file_text(log_layout::status_endpoint_file(run_dir.string())));
  if (endpoint.empty()) {
    throw Error("run " + run_dir.string() + " has no status API (no status_endpoint file): " + how_to_enable,
                kNoStatusApiExit);
  }
  const std::string token = trim(file_text(log_layout::status_token_file(run_dir.string())));
  if (token.empty()) {
    throw Error("cannot read the run's token " + log_layout::status_token_file(run_dir.string()) +
                    ": it is missing, or readable only by the user who launched the run (mode 0600); run this as "
                    "that user",
                kTokenExit);
  }
  int status = 0;
  std::string body, why;
  const int wait_s = static_cast<int>(kMaxStacksDumpS) + 30;
  if (!status_http_post(endpoint, "/stacks", token, wait_s, status, body, why)) {
    throw Error("run " + run_dir.string() + " is not running: " + why + ": its launcher has ended (`mgtrain status " +
                    run_dir.string() + "` shows what its files say)",
                kNotRunningExit);
  }
  const Json answer = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  const std::string error = text_or_dash(field(answer, "error"));
  const std::string message = text_or_dash(field(answer, "message"));
  if (status == 401) {
    throw Error("the launcher at " + endpoint + " refused the token of " +
                    log_layout::status_token_file(run_dir.string()) +
                    " (a status_token of another launch of this run?)",
                kTokenExit);
  }
  if (status == 409 && error == "busy") throw Error("busy: " + message, kBusyExit);
  if (status == 409 && error == "not_running") throw Error("not running: " + message, kNotRunningExit);
  if (status == 404) {  // an older launcher: /stacks is no page of its
    throw Error("the launcher at " + endpoint + " does not know POST /stacks (an older mgtrain?)");
  }
  if (status != 200 || !answer.is_object() || !field(answer, "ranks").is_array()) {
    throw Error("the status API at " + endpoint + " answered POST /stacks with HTTP " + std::to_string(status) + ": " +
                (message != "-" ? message
                 : error != "-" ? error
                                : body));
  }
  if (json) {
    std::fputs(body.c_str(), stdout);
    return 0;
  }
  print_stacks(answer);
  return 0;
}

}  // namespace

int run_status_command(const StatusRequest& request) {
  const fs::path run_dir = find_run_directory(request);
  if (request.stacks) return run_stacks(run_dir, request.json);
  const RunSummary summary = summarize_run(run_dir.filename().string(), run_dir.string(), unix_seconds_now());
  if (summary.record && summary.status != "running") {  // no launcher to ask
    if (request.json) {
      std::fprintf(stderr,
                   "mgtrain: run %s has ended (%s): there is no live status; `mgtrain runs --json` has its "
                   "record\n",
                   run_dir.c_str(), summary.status.c_str());
      return 1;
    }
    print_ended(run_dir, summary);
    return 0;
  }
  const std::string endpoint = trim(file_text(log_layout::status_endpoint_file(run_dir.string())));
  std::string why = "the run was not launched with --status-port";
  if (!endpoint.empty()) {
    std::optional<std::string> body = status_http_get(endpoint, "/status", why);
    if (body) {
      if (request.json) {
        std::fputs(body->c_str(), stdout);
        return 0;
      }
      try {
        print_live(Json::parse(*body), endpoint);
        return 0;
      } catch (const Json::exception& e) {
        throw Error("the status API at " + endpoint + " answered something that is not its JSON: " + e.what());
      }
    }
  }
  std::fprintf(request.json ? stderr : stdout, "no live status server for %s: %s\n", run_dir.c_str(), why.c_str());
  if (request.json) return 1;
  print_from_files(run_dir, summary);
  return 0;
}

}  // namespace mgtrain
