// Writing, reading and judging run.json (see run_record.hpp). run.json is written by hand with json_quote (times
// need more digits than JsonWriter's %g) and read with yaml-cpp (JSON is YAML 1.2).
#include "observe/run_record.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/json_writer.hpp"

namespace mgtrain {
namespace fs = std::filesystem;
namespace {

std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string boot_id() { return trimmed(read_small_file("/proc/sys/kernel/random/boot_id")); }

// Field 22 of /proc/<pid>/stat (starttime); -1 when the process does not exist or is a zombie (it has ended,
// its parent has not collected it yet).
long long process_start_ticks(long pid) {
  const std::string stat = read_small_file("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int index = 3; index <= 22 && (fields >> field); ++index) {
    if (index == 3 && (field == "Z" || field == "X")) return -1;
    if (index == 22) return std::atoll(field.c_str());
  }
  return -1;
}

std::string host_name() {
  char buffer[HOST_NAME_MAX + 1] = {};
  if (gethostname(buffer, sizeof buffer - 1) != 0) return "";
  return buffer;
}

std::vector<std::string> own_command_line() {
  const std::string text = read_small_file("/proc/self/cmdline");
  std::vector<std::string> args;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    args.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

double now_unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string string_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_quote(items[i]);
  return out + "]";
}

std::string seconds_text(double seconds) { return fmt::format("{:.3f}", seconds); }

template <class T>
T read_as(const YAML::Node& root, const char* key, const std::string& source, bool required = true, T fallback = T()) {
  const YAML::Node node = root[key];
  if (!node || node.IsNull()) {
    if (required) throw Error(fmt::format("{}: \"{}\" is missing: the file is not a run record (or a damaged one)", source, key));
    return fallback;
  }
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw Error(fmt::format("{}: \"{}\" has the wrong type", source, key));
  }
}

}  // namespace

std::string run_record_to_json(const RunRecord& r) {
  std::string out = "{\n";
  out += "  \"run_id\": " + json_quote(r.run_id) + ",\n";
  out += "  \"status\": " + json_quote(r.status) + ",\n";
  out += "  \"exit_code\": " + (r.exit_code ? std::to_string(*r.exit_code) : std::string("null")) + ",\n";
  out += "  \"command_line\": " + string_list(r.command_line) + ",\n";
  out += "  \"cwd\": " + json_quote(r.cwd) + ",\n";
  out += "  \"hosts\": " + string_list(r.hosts) + ",\n";
  out += fmt::format("  \"nnodes\": {},\n  \"world_size\": {},\n", r.nnodes, r.world_size);
  out += "  \"start_time\": " + seconds_text(r.start_time) + ",\n";
  out += "  \"end_time\": " + (r.end_time ? seconds_text(*r.end_time) : std::string("null")) + ",\n";
  out += fmt::format("  \"attempts\": {},\n", r.attempts);
  out += "  \"config_file\": " + json_quote(r.config_file) + ",\n";
  out += fmt::format("  \"launcher\": {{\"pid\": {}, \"host\": {}, \"boot_id\": {}, \"start_ticks\": {}}}\n", r.launcher.pid,
                     json_quote(r.launcher.host), json_quote(r.launcher.boot_id), r.launcher.start_ticks);
  out += "}\n";
  return out;
}

RunRecord parse_run_record(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    throw Error(fmt::format("{}: not valid JSON ({}): a torn or edited run record; move it away to list the run without it",
                            source, error.msg));
  }
  if (!root.IsMap()) throw Error(source + ": not a JSON object: this is not a run record");
  RunRecord r;
  r.run_id = read_as<std::string>(root, "run_id", source);
  r.status = read_as<std::string>(root, "status", source);
  if (root["exit_code"] && !root["exit_code"].IsNull()) r.exit_code = read_as<int>(root, "exit_code", source);
  if (root["command_line"] && root["command_line"].IsSequence()) {
    for (const auto& item : root["command_line"]) r.command_line.push_back(item.as<std::string>());
  }
  r.cwd = read_as<std::string>(root, "cwd", source, false);
  if (root["hosts"] && root["hosts"].IsSequence()) {
    for (const auto& item : root["hosts"]) r.hosts.push_back(item.as<std::string>());
  }
  r.nnodes = read_as<int>(root, "nnodes", source, false, 1);
  r.world_size = read_as<int>(root, "world_size", source, false, 1);
  r.start_time = read_as<double>(root, "start_time", source);
  if (root["end_time"] && !root["end_time"].IsNull()) r.end_time = read_as<double>(root, "end_time", source);
  r.attempts = read_as<int>(root, "attempts", source, false, 0);
  r.config_file = read_as<std::string>(root, "config_file", source, false, "config.yaml");
  const YAML::Node launcher = root["launcher"];
  if (launcher && launcher.IsMap()) {
    const std::string where = source + ": launcher";
    r.launcher.pid = read_as<long>(launcher, "pid", where, false);
    r.launcher.host = read_as<std::string>(launcher, "host", where, false);
    r.launcher.boot_id = read_as<std::string>(launcher, "boot_id", where, false);
    r.launcher.start_ticks = read_as<long long>(launcher, "start_ticks", where, false);
  }
  return r;
}

std::string run_record_file(const std::string& run_dir) { return run_dir + "/run.json"; }

void write_run_record(const std::string& run_dir, const RunRecord& record) {
  write_file_atomically(run_record_file(run_dir), run_record_to_json(record));
}

std::optional<RunRecord> read_run_record(const std::string& run_dir) {
  const std::string path = run_record_file(run_dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT || !fs::exists(path)) return std::nullopt;
    throw SystemError("cannot read " + path, errno);
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_run_record(text, path);
}

LauncherIdentity this_launcher() {
  LauncherIdentity self;
  self.pid = static_cast<long>(getpid());
  self.host = host_name();
  self.boot_id = boot_id();
  self.start_ticks = process_start_ticks(self.pid);
  return self;
}

RunRecord start_run_record(const std::string& run_id, const std::vector<std::string>& hosts, int nnodes, int world_size) {
  RunRecord r;
  r.run_id = run_id;
  r.status = "running";
  r.command_line = own_command_line();
  std::error_code error;
  r.cwd = fs::current_path(error).string();
  r.hosts = hosts;
  r.nnodes = nnodes;
  r.world_size = world_size;
  r.start_time = now_unix_seconds();
  r.launcher = this_launcher();
  return r;
}

std::string finished_status(int exit_code, bool launcher_signalled, bool stopped_after_checkpoint) {
  if (launcher_signalled || stopped_after_checkpoint) return "stopped";
  return exit_code == 0 ? "succeeded" : "failed";
}

void finish_run_record(RunRecord& record, const std::string& status, int exit_code, int attempts) {
  record.status = status;
  record.exit_code = exit_code;
  record.end_time = now_unix_seconds();
  record.attempts = attempts;
}

std::string keep_earlier_run_record(const std::string& run_dir, const std::string& archive_dir) {
  const fs::path current = run_record_file(run_dir);
  std::error_code error;
  if (!fs::exists(current, error)) return "";
  fs::path archive = archive_dir;
  if (archive.empty()) {
    for (int k = 1;; ++k) {
      archive = fs::path(run_dir) / "earlier" / std::to_string(k);
      if (!fs::exists(archive, error)) break;
    }
  }
  fs::create_directories(archive, error);
  if (error) throw Error("cannot create " + archive.string() + ": " + error.message());
  const fs::path target = archive / "run.json";
  fs::rename(current, target, error);
  if (error) throw Error("cannot move " + current.string() + " to " + target.string() + ": " + error.message());
  return archive.string();
}

RunRecorder::RunRecorder(std::string run_dir, RunRecord record) : run_dir_(std::move(run_dir)), record_(std::move(record)) {
  write_run_record(run_dir_, record_);
}

RunRecorder::~RunRecorder() {
  if (finished_) return;
  try {
    finish_run_record(record_, "failed", 1, record_.attempts);
    write_run_record(run_dir_, record_);
  } catch (...) {
  }
}

std::string RunRecorder::finish(const std::string& status, int exit_code, int attempts) {
  finished_ = true;
  finish_run_record(record_, status, exit_code, attempts);
  try {
    write_run_record(run_dir_, record_);
  } catch (const std::exception& e) {
    return std::string("mgtrain: warning: the run record was not updated: ") + e.what();
  }
  return "";
}

LauncherState launcher_state(const LauncherIdentity& launcher) {
  if (launcher.pid <= 0) return LauncherState::kUnknown;
  if (!launcher.host.empty() && launcher.host != host_name()) return LauncherState::kUnknown;
  if (!launcher.boot_id.empty() && launcher.boot_id != boot_id()) return LauncherState::kGone;
  const long long ticks = process_start_ticks(launcher.pid);
  if (ticks < 0) return LauncherState::kGone;
  if (launcher.start_ticks > 0 && ticks != launcher.start_ticks) return LauncherState::kGone;  // pid reused
  return LauncherState::kAlive;
}

std::string effective_status(const RunRecord& record) {
  if (record.status == "running" && launcher_state(record.launcher) == LauncherState::kGone) return "interrupted";
  return record.status;
}

}  // namespace mgtrain
