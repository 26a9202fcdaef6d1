// `mgtrain status [RUN] [--log-dir DIR] [--json]`: a run's live state for humans. Reads the endpoint the
// launcher wrote to <run dir>/status_endpoint and asks its /status; without a live launcher it says so
// and shows what the run's files say (heartbeats, the last resource sample, the last metrics row).
// docs/monitoring.md#status-api-and-dashboard
#include <sys/stat.h>

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>

#include "commands.hpp"
#include "util/error.hpp"
#include "observe/status_server.hpp"
#include "observe/status_snapshot.hpp"

namespace mgtrain {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string default_log_directory() {
  const char* env = std::getenv("MGTRAIN_LAUNCH_LOG_DIR");
  return env && *env ? env : "runs";
}

// The run directory: RUN under the log directory, or RUN itself, or the newest run (by config.yaml's time).
fs::path find_run_directory(const StatusRequest& request) {
  const fs::path log_dir = request.log_dir.empty() ? default_log_directory() : request.log_dir;
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
  if (newest.empty()) throw UsageError("no runs under " + log_dir.string() + ": give --log-dir DIR (launch.log_dir of the run)");
  return newest;
}

std::string text_or_dash(const YAML::Node& node, int decimals = -1) {
  if (!node || node.IsNull()) return "-";
  if (decimals < 0) return node.as<std::string>();
  return fmt::format("{:.{}f}", node.as<double>(), decimals);
}

std::string bytes_text(const YAML::Node& node) {
  if (!node || node.IsNull()) return "-";
  double value = node.as<double>();
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

void print_live(const YAML::Node& s, const std::string& endpoint) {
  const int attempt = s["attempt"].as<int>();
  std::printf("run %s: %s, attempt %d of %d (restarts %d), %s node %d\nstatus API http://%s/  run directory %s\n\n",
              s["run_id"].as<std::string>().c_str(), s["phase"].as<std::string>().c_str(), attempt + 1,
              s["max_restarts"].as<int>() + 1, s["restarts"].as<int>(), s["hostname"].as<std::string>().c_str(),
              s["node_rank"].as<int>(), endpoint.c_str(), s["run_dir"].as<std::string>().c_str());
  const double now = s["time"].as<double>();
  std::printf("%-5s %-5s %-8s %-8s %8s %10s %11s %6s %11s\n", "rank", "local", "pid", "state", "step", "loss", "heartbeat",
              "CPU%", "RSS");
  for (const YAML::Node& r : s["ranks"]) {
    const std::string beat = r["last_heartbeat"].IsNull() ? "-" : fmt::format("{:.1f} s ago", now - r["last_heartbeat"].as<double>());
    std::printf("%-5s %-5s %-8s %-8s %8s %10s %11s %6s %11s\n", text_or_dash(r["rank"]).c_str(), text_or_dash(r["local_rank"]).c_str(),
                text_or_dash(r["pid"]).c_str(), text_or_dash(r["state"]).c_str(), text_or_dash(r["step"]).c_str(),
                text_or_dash(r["loss"], 4).c_str(), beat.c_str(), text_or_dash(r["cpu_percent"], 0).c_str(),
                bytes_text(r["rss_bytes"]).c_str());
  }
  if (s["gpus"].size() == 0) {
    std::printf("\nGPUs: no statistics (no NVML on this machine)\n");
    return;
  }
  std::printf("\nGPUs (driver %s):\n", text_or_dash(s["driver_version"]).c_str());
  for (const YAML::Node& g : s["gpus"]) {
    std::printf("  %s %s: %s%% busy, memory %s / %s, %s C, %s W\n", text_or_dash(g["index"]).c_str(), text_or_dash(g["name"]).c_str(),
                text_or_dash(g["utilization_percent"]).c_str(), bytes_text(g["memory_used_bytes"]).c_str(),
                bytes_text(g["memory_total_bytes"]).c_str(), text_or_dash(g["temperature_c"]).c_str(),
                text_or_dash(g["power_w"], 0).c_str());
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
  const std::string record = read_file(run_dir / "run.json");
  if (!record.empty()) {
    try {
      YAML::Node r = YAML::Load(record);
      std::printf("run.json: status %s, exit code %s, attempts %s\n", text_or_dash(r["status"]).c_str(),
                  text_or_dash(r["exit_code"]).c_str(), text_or_dash(r["attempts"]).c_str());
    } catch (const YAML::Exception&) {
      std::printf("run.json: cannot be read\n");
    }
  }
  // The newest attempt's heartbeats.
  std::error_code error;
  int attempt = -1;
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("attempt_", 0) == 0) attempt = std::max(attempt, std::atoi(name.c_str() + 8));
  }
  if (attempt >= 0) {
    std::printf("attempt %d, last heartbeats:\n", attempt + 1);
    const fs::path attempt_dir = run_dir / ("attempt_" + std::to_string(attempt));
    for (const fs::directory_entry& entry : fs::directory_iterator(attempt_dir, error)) {
      std::optional<HeartbeatInfo> beat = parse_heartbeat_line(read_file(entry.path() / "heartbeat"));
      std::printf("  %-8s %s\n", entry.path().filename().c_str(),
                  beat ? fmt::format("step {} loss {} ({:.0f} s ago)", beat->step, beat->loss ? fmt::format("{:.4f}", *beat->loss) : "-",
                                     unix_now() - beat->time).c_str()
                       : "no heartbeat");
    }
  }
  const std::string resources = last_complete_line(read_file(run_dir / "resources.jsonl"));
  if (!resources.empty()) std::printf("last resource sample: %s\n", resources.c_str());
  const std::string metrics = last_complete_line(read_file(run_dir / "metrics.jsonl"));
  if (!metrics.empty()) std::printf("last metrics row: %s\n", metrics.c_str());
}

}  // namespace

int run_status_command(const StatusRequest& request) {
  const fs::path run_dir = find_run_directory(request);
  std::string endpoint = read_file(run_dir / "status_endpoint");
  while (!endpoint.empty() && (endpoint.back() == '\n' || endpoint.back() == ' ')) endpoint.pop_back();
  std::string why = "the run was not launched with --status-port";
  if (!endpoint.empty()) {
    std::optional<std::string> body = status_http_get(endpoint, "/status", why);
    if (body) {
      if (request.json) {
        std::fputs(body->c_str(), stdout);
        return 0;
      }
      try {
        print_live(YAML::Load(*body), endpoint);
        return 0;
      } catch (const YAML::Exception& e) {
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
