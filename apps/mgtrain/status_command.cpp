// `mgtrain status [RUN] [--log-dir DIR] [--json] [--stacks]`: a run's live state for humans. Reads the endpoint the
// launcher wrote to <run dir>/status_endpoint and asks its /status; without a live launcher it says so
// and shows what the run's files say (heartbeats, the last resource sample, the last metrics row).
// docs/monitoring.md#status-api-and-dashboard. With --stacks: POST /stacks with the run's token, then each rank's
// stacks file and top frames, or an error with its own exit code (docs/diagnosis.md, docs/exit-codes.md).
#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "contract/log_layout.hpp"
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
    const fs::path config = entry.path() / "config.yaml";
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
  const double now = s.at("time").get<double>();
  std::printf("%-5s %-5s %-8s %-8s %8s %10s %11s %6s %11s\n", "rank", "local", "pid", "state", "step", "loss",
              "heartbeat", "CPU%", "RSS");
  for (const Json& r : s.at("ranks")) {
    const Json& last = field(r, "last_heartbeat");
    const std::string beat = last.is_number() ? fmt::format("{:.1f} s ago", now - last.get<double>()) : "-";
    std::printf("%-5s %-5s %-8s %-8s %8s %10s %11s %6s %11s\n", text_or_dash(field(r, "rank")).c_str(),
                text_or_dash(field(r, "local_rank")).c_str(), text_or_dash(field(r, "pid")).c_str(),
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

// The last complete line of a JSONL file ("" when none).
std::string last_complete_line(const std::string& text) {
  std::size_t end = text.rfind('\n');
  if (end == std::string::npos) return "";
  std::size_t begin = text.rfind('\n', end == 0 ? 0 : end - 1);
  begin = begin == std::string::npos || begin >= end ? 0 : begin + 1;
  return text.substr(begin, end - begin);
}

void print_from_files(const fs::path& run_dir) {
  std::printf("run %s (from its files, %s)\n", run_dir.filename().c_str(), run_dir.c_str());
  const std::string record = file_text(run_dir / "run.json");
  if (!record.empty()) {
    const Json r = Json::parse(record, nullptr, /*allow_exceptions=*/false);
    if (r.is_object()) {
      std::printf("run.json: status %s, exit code %s, attempts %s\n", text_or_dash(field(r, "status")).c_str(),
                  text_or_dash(field(r, "exit_code")).c_str(), text_or_dash(field(r, "attempts")).c_str());
    } else {
      std::printf("run.json: cannot be read\n");
    }
  }
  // The newest attempt's heartbeats.
  std::error_code error;
  int attempt = -1;
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (starts_with(name, "attempt_"))
      attempt = std::max(attempt, static_cast<int>(parse_int(name.substr(8)).value_or(-1)));
  }
  if (attempt >= 0) {
    std::printf("attempt %d, last heartbeats:\n", attempt + 1);
    const fs::path attempt_dir = run_dir / ("attempt_" + std::to_string(attempt));
    for (const fs::directory_entry& entry : fs::directory_iterator(attempt_dir, error)) {
      std::optional<HeartbeatInfo> beat = parse_heartbeat_line(file_text(entry.path() / "heartbeat"));
      std::printf(
          "  %-8s %s\n", entry.path().filename().c_str(),
          beat ? fmt::format("step {} loss {} ({:.0f} s ago)", beat->step,
                             beat->loss ? fmt::format("{:.4f}", *beat->loss) : "-", unix_seconds_now() - beat->time)
                     .c_str()
               : "no heartbeat");
    }
  }
  const std::string resources = last_complete_line(file_text(run_dir / "resources.jsonl"));
  if (!resources.empty()) std::printf("last resource sample: %s\n", resources.c_str());
  const std::string metrics = last_complete_line(file_text(run_dir / "metrics.jsonl"));
  if (!metrics.empty()) std::printf("last metrics row: %s\n", metrics.c_str());
}

// `mgtrain status --stacks`'s exit codes besides 0, 1 and 2 (docs/exit-codes.md).
constexpr int kNotRunningExit = 3;   // no launcher answers, or no rank runs now
constexpr int kNoStatusApiExit = 4;  // the run was launched without --status-port
constexpr int kTokenExit = 5;        // status_token missing or unreadable, or refused
constexpr int kBusyExit = 6;         // another dump is being taken

void print_stacks(const Json& answer) {
  const Json& ranks = answer.at("ranks");
  std::printf("stacks of run %s, attempt %d: %zu rank%s dumped in %s s\n",
              text_or_dash(field(answer, "run_id")).c_str(), answer.at("attempt").get<int>() + 1, ranks.size(),
              ranks.size() == 1 ? "" : "s", text_or_dash(field(answer, "seconds"), 2).c_str());
  for (const Json& r : ranks) {
    std::printf("\nrank %s (local %s, pid %s): %s, %s\n", text_or_dash(field(r, "rank")).c_str(),
                text_or_dash(field(r, "local_rank")).c_str(), text_or_dash(field(r, "pid")).c_str(),
                text_or_dash(field(r, "outcome")).c_str(), text_or_dash(field(r, "stacks_file")).c_str());
    const Json& frames = field(r, "top_frames");
    if (!frames.is_array() || frames.empty()) std::printf("  (no frames)\n");
    if (frames.is_array()) {
      for (const Json& frame : frames) std::printf("  %s\n", text_or_dash(frame).c_str());
    }
    const Json& notes = field(r, "notes");
    if (notes.is_array()) {
      for (const Json& note : notes) std::printf("  note: %s\n", text_or_dash(note).c_str());
    }
  }
}

// POST /stacks to the run's launcher, then the answer printed (or as JSON).
int run_stacks(const fs::path& run_dir, bool json) {
  const std::string how_to_enable =
      "relaunch it with --status-port PORT (launch.status_port) to dump its stacks on demand; a job started with "
      "--hang-timeout S gets every rank's stacks.txt by itself when it hangs";
  const std::string endpoint = trim(file_text(run_dir / "status_endpoint"));
  if (endpoint.empty()) {
    throw Error("run " + run_dir.string() + " has no status API (no status_endpoint file): " + how_to_enable,
                kNoStatusApiExit);
  }
  const std::string token = trim(file_text(run_dir / "status_token"));
  if (token.empty()) {
    throw Error("cannot read the run's token " + (run_dir / "status_token").string() +
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
    throw Error("the launcher at " + endpoint + " refused the token of " + (run_dir / "status_token").string() +
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
  const std::string endpoint = trim(file_text(run_dir / "status_endpoint"));
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
  print_from_files(run_dir);
  return 0;
}

}  // namespace mgtrain
