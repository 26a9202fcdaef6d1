// Writing, reading and judging run.json (see run_record.hpp), with nlohmann::json.
#include "observe/run_record.hpp"
#include "util/json_text.hpp"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contract/log_layout.hpp"
#include "host/process_stats.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/strings.hpp"
#include "util/time_format.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace fs = std::filesystem;
namespace {

using Json = nlohmann::ordered_json;

std::string read_small_file(const std::string& path) { return try_read_file(path).value_or(""); }

std::string boot_id() { return trim(read_small_file("/proc/sys/kernel/random/boot_id")); }

// Field 22 of /proc/<pid>/stat (starttime); -1 when the process does not exist or is a zombie (it has ended,
// its parent has not collected it yet).
long long process_start_ticks(long pid) {
  const std::optional<ProcStat> stat = read_proc_stat(static_cast<pid_t>(pid));
  if (!stat || stat->state == 'Z' || stat->state == 'X') return -1;
  return stat->start_ticks;
}

std::string host_name() {
  char buffer[HOST_NAME_MAX + 1] = {};
  if (gethostname(buffer, sizeof buffer - 1) != 0) return "";
  return buffer;
}

std::vector<std::string> own_command_line() { return split_lines(read_small_file("/proc/self/cmdline"), '\0'); }

// A key of `object`: nullptr when it is missing or null.
const Json* member(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

template <class T>
bool has_type(const Json& value) {
  if constexpr (std::is_same_v<T, std::string>)
    return value.is_string();
  else if constexpr (std::is_floating_point_v<T>)
    return value.is_number();
  else
    return value.is_number_integer();
}

template <class T>
T read_as(const Json& root, const char* key, const std::string& source, bool required = true, T fallback = T()) {
  const Json* value = member(root, key);
  if (!value) {
    if (required)
      throw Error(fmt::format("{}: \"{}\" is missing: the file is not a run record (or a damaged one)", source, key));
    return fallback;
  }
  if (!has_type<T>(*value)) throw Error(fmt::format("{}: \"{}\" has the wrong type", source, key));
  return value->get<T>();
}

std::vector<std::string> read_strings(const Json& root, const char* key, const std::string& source) {
  std::vector<std::string> items;
  const Json* list = member(root, key);
  if (!list || !list->is_array()) return items;
  for (const Json& item : *list) {
    if (!item.is_string()) throw Error(fmt::format("{}: \"{}\" has the wrong type", source, key));
    items.push_back(item.get<std::string>());
  }
  return items;
}

// A step rate to four significant digits (run.json is for people and scripts, not for exact replay).
Json rate_json(double rate) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", rate);
  return std::strtod(buffer, nullptr);
}

}  // namespace

std::string recovery_to_json(const RoundEntry::Recovery& r) {
  const auto seconds = [](const std::optional<double>& s) { return s ? json_seconds(*s) : Json(nullptr); };
  const auto step = [](const std::optional<long long>& s) { return s ? Json(*s) : Json(nullptr); };
  Json recovery = Json::object();
  recovery["fault"] = json_seconds(r.fault);
  recovery["detected_s"] = seconds(r.detected_s);
  recovery["stopped_s"] = seconds(r.stopped_s);
  recovery["rendezvous_s"] = seconds(r.rendezvous_s);
  recovery["first_step_s"] = seconds(r.first_step_s);
  recovery["last_step"] = step(r.last_step);
  recovery["resumed_step"] = step(r.resumed_step);
  recovery["steps_lost"] = step(r.steps_lost);
  recovery["resumed_step_from"] = r.resumed_step ? Json(r.resumed_step_exact ? "workers" : "estimate") : Json(nullptr);
  recovery["resumed_from"] = r.resumed_from ? Json(start_source_name(*r.resumed_from)) : Json(nullptr);
  return json_text(recovery);
}

std::string run_record_to_json(const RunRecord& r) {
  Json root = Json::object();
  root["run_id"] = r.run_id;
  root["status"] = r.status;
  root["exit_code"] = r.exit_code ? Json(*r.exit_code) : Json(nullptr);
  root["command_line"] = r.command_line;
  root["cwd"] = r.cwd;
  root["hosts"] = r.hosts;
  root["nnodes"] = r.nnodes;
  root["world_size"] = r.world_size;
  root["start_time"] = json_seconds(r.start_time);  // milliseconds are all run.json keeps
  root["end_time"] = r.end_time ? json_seconds(*r.end_time) : Json(nullptr);
  root["attempts"] = r.attempts;
  root["config_file"] = r.config_file;
  Json launcher = Json::object();
  launcher["pid"] = r.launcher.pid;
  launcher["host"] = r.launcher.host;
  launcher["boot_id"] = r.launcher.boot_id;
  launcher["start_ticks"] = r.launcher.start_ticks;
  root["launcher"] = std::move(launcher);
  if (!r.stragglers.empty()) {
    Json stragglers = Json::array();
    for (const StragglerRecord& episode : r.stragglers) {
      Json item = Json::object();
      item["rank"] = episode.rank;
      if (!episode.host.empty()) item["host"] = episode.host;
      if (episode.node_rank) item["node_rank"] = *episode.node_rank;
      item["attempt"] = episode.attempt;
      item["start"] = json_seconds(episode.start);
      item["end"] = episode.end ? json_seconds(*episode.end) : Json(nullptr);
      item["step_rate"] = rate_json(episode.step_rate);
      item["median_step_rate"] = rate_json(episode.median_step_rate);
      item["lowest_step_rate"] = rate_json(episode.lowest_step_rate);
      if (episode.busy_per_step) {
        item["busy_per_step"] = rate_json(*episode.busy_per_step);
        item["median_busy_per_step"] = rate_json(episode.median_busy_per_step.value_or(0));
        item["highest_busy_per_step"] = rate_json(episode.highest_busy_per_step.value_or(0));
      }
      stragglers.push_back(std::move(item));
    }
    root["stragglers"] = std::move(stragglers);
  }
  if (!r.resumes.empty()) {
    Json resumes = Json::array();
    for (const ResumeRecord& resume : r.resumes) {
      Json item = Json::object();
      item["attempt"] = resume.attempt;
      item["step"] = resume.step;
      item["from"] = start_source_name(resume.from);
      item["time"] = json_seconds(resume.time);
      resumes.push_back(std::move(item));
    }
    root["resumes"] = std::move(resumes);
  }
  if (!r.replication.empty()) {
    Json replication = Json::array();
    for (const NodeReplication& node : r.replication) {
      Json item = Json::object();
      item["node_rank"] = node.node_rank;
      item["host"] = node.host;
      item["buddy"] = node.buddy.empty() ? Json(nullptr) : Json(node.buddy);
      item["sent"] = node.sent;
      item["skipped"] = node.skipped;
      item["bytes_sent"] = node.bytes_sent;
      item["sent_step"] = node.sent_step ? Json(*node.sent_step) : Json(nullptr);
      item["sent_time"] = node.sent_time ? json_seconds(*node.sent_time) : Json(nullptr);
      item["received"] = node.received;
      item["time"] = json_seconds(node.time);
      replication.push_back(std::move(item));
    }
    root["replication"] = std::move(replication);
  }
  if (!r.rounds.empty()) {
    const auto node_json = [](const RoundEntry::Node& node) {
      Json item = Json::object();
      item["node_rank"] = node.node_rank;
      item["host"] = node.host;
      item["address"] = node.address;
      item["first_rank"] = node.first_rank;
      item["nproc"] = node.nproc;
      return item;
    };
    Json nodes = Json::array();
    for (const RoundEntry::Node& node : r.rounds.back().nodes) nodes.push_back(node_json(node));
    root["nodes"] = std::move(nodes);
    Json rounds = Json::array();
    for (const RoundEntry& round : r.rounds) {
      Json item = Json::object();
      item["round"] = round.round;
      item["restart_count"] = round.restart_count;
      item["started_by"] = round.started_by;
      item["start"] = json_seconds(round.start);
      item["end"] = round.end ? json_seconds(*round.end) : Json(nullptr);
      item["world_size"] = round.world_size;
      Json members = Json::array();
      for (const RoundEntry::Node& node : round.nodes) members.push_back(node_json(node));
      item["nodes"] = std::move(members);
      item["ended_by"] = round.ended_by.empty() ? Json(nullptr) : Json(round.ended_by);
      item["cause"] = round.cause.empty() ? Json(nullptr) : Json(round.cause);
      if (round.recovery) item["recovery"] = Json::parse(recovery_to_json(*round.recovery));
      rounds.push_back(std::move(item));
    }
    root["rounds"] = std::move(rounds);
  }
  return json_text(root, 2) + "\n";
}

RunRecord parse_run_record(const std::string& text, const std::string& source) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& error) {
    throw Error(
        fmt::format("{}: not valid JSON ({}): a torn or edited run record; move it away to list the run without it",
                    source, error.what()));
  }
  if (!root.is_object()) throw Error(source + ": not a JSON object: this is not a run record");
  RunRecord r;
  r.run_id = read_as<std::string>(root, "run_id", source);
  r.status = read_as<std::string>(root, "status", source);
  if (member(root, "exit_code")) r.exit_code = read_as<int>(root, "exit_code", source);
  r.command_line = read_strings(root, "command_line", source);
  r.cwd = read_as<std::string>(root, "cwd", source, false);
  r.hosts = read_strings(root, "hosts", source);
  r.nnodes = read_as<int>(root, "nnodes", source, false, 1);
  r.world_size = read_as<int>(root, "world_size", source, false, 1);
  r.start_time = read_as<double>(root, "start_time", source);
  if (member(root, "end_time")) r.end_time = read_as<double>(root, "end_time", source);
  r.attempts = read_as<int>(root, "attempts", source, false, 0);
  r.config_file = read_as<std::string>(root, "config_file", source, false, log_layout::kConfigFileName);
  if (const Json* launcher = member(root, "launcher"); launcher && launcher->is_object()) {
    const std::string where = source + ": launcher";
    r.launcher.pid = read_as<long>(*launcher, "pid", where, false);
    r.launcher.host = read_as<std::string>(*launcher, "host", where, false);
    r.launcher.boot_id = read_as<std::string>(*launcher, "boot_id", where, false);
    r.launcher.start_ticks = read_as<long long>(*launcher, "start_ticks", where, false);
  }
  if (const Json* stragglers = member(root, "stragglers")) {
    const std::string where = source + ": stragglers";
    if (!stragglers->is_array()) throw Error(where + " is not a list");
    for (const Json& item : *stragglers) {
      if (!item.is_object()) throw Error(where + ": an entry is not an object");
      StragglerRecord episode;
      episode.rank = read_as<int>(item, "rank", where);
      episode.host = read_as<std::string>(item, "host", where, false);
      if (member(item, "node_rank")) episode.node_rank = read_as<int>(item, "node_rank", where);
      episode.attempt = read_as<int>(item, "attempt", where, false);
      episode.start = read_as<double>(item, "start", where);
      if (member(item, "end")) episode.end = read_as<double>(item, "end", where);
      episode.step_rate = read_as<double>(item, "step_rate", where, false);
      episode.median_step_rate = read_as<double>(item, "median_step_rate", where, false);
      episode.lowest_step_rate = read_as<double>(item, "lowest_step_rate", where, false);
      if (member(item, "busy_per_step")) {
        episode.busy_per_step = read_as<double>(item, "busy_per_step", where);
        episode.median_busy_per_step = read_as<double>(item, "median_busy_per_step", where, false);
        episode.highest_busy_per_step = read_as<double>(item, "highest_busy_per_step", where, false);
      }
      r.stragglers.push_back(episode);
    }
  }
  if (const Json* resumes = member(root, "resumes")) {
    const std::string where = source + ": resumes";
    if (!resumes->is_array()) throw Error(where + " is not a list");
    for (const Json& item : *resumes) {
      if (!item.is_object()) throw Error(where + ": an entry is not an object");
      ResumeRecord resume;
      resume.attempt = read_as<int>(item, "attempt", where);
      resume.step = read_as<long long>(item, "step", where);
      const std::string from = read_as<std::string>(item, "from", where);
      const std::optional<StartSource> source_of_step = parse_start_source(from);
      if (!source_of_step) throw Error(where + ": \"from\" is '" + from + "', not none, checkpoint or snapshot");
      resume.from = *source_of_step;
      resume.time = read_as<double>(item, "time", where, false);
      r.resumes.push_back(resume);
    }
  }
  if (const Json* replication = member(root, "replication")) {
    const std::string where = source + ": replication";
    if (!replication->is_array()) throw Error(where + " is not a list");
    for (const Json& item : *replication) {
      if (!item.is_object()) throw Error(where + ": an entry is not an object");
      NodeReplication node;
      node.node_rank = read_as<int>(item, "node_rank", where);
      node.host = read_as<std::string>(item, "host", where, false);
      if (const Json* buddy = member(item, "buddy"); buddy && !buddy->is_null()) {
        node.buddy = read_as<std::string>(item, "buddy", where);
      }
      node.sent = read_as<long long>(item, "sent", where, false);
      node.skipped = read_as<long long>(item, "skipped", where, false);
      node.bytes_sent = read_as<long long>(item, "bytes_sent", where, false);
      if (const Json* step = member(item, "sent_step"); step && !step->is_null()) {
        node.sent_step = read_as<long long>(item, "sent_step", where);
      }
      if (const Json* time = member(item, "sent_time"); time && !time->is_null()) {
        node.sent_time = read_as<double>(item, "sent_time", where);
      }
      node.received = read_as<long long>(item, "received", where, false);
      node.time = read_as<double>(item, "time", where, false);
      r.replication.push_back(node);
    }
  }
  if (const Json* rounds = member(root, "rounds")) {
    const std::string where = source + ": rounds";
    if (!rounds->is_array()) throw Error(where + " is not a list");
    for (const Json& item : *rounds) {
      if (!item.is_object()) throw Error(where + ": an entry is not an object");
      RoundEntry round;
      round.round = read_as<int>(item, "round", where);
      round.restart_count = read_as<int>(item, "restart_count", where, false);
      round.started_by = read_as<std::string>(item, "started_by", where, false);
      round.start = read_as<double>(item, "start", where, false);
      if (const Json* end = member(item, "end"); end && end->is_number()) round.end = end->get<double>();
      round.world_size = read_as<int>(item, "world_size", where, false);
      if (const Json* ended = member(item, "ended_by"); ended && ended->is_string()) round.ended_by = *ended;
      if (const Json* cause = member(item, "cause"); cause && cause->is_string()) round.cause = *cause;
      if (const Json* recovery = member(item, "recovery"); recovery && recovery->is_object()) {
        RoundEntry::Recovery r;
        r.fault = read_as<double>(*recovery, "fault", where, false);
        const auto seconds = [&](const char* key) -> std::optional<double> {
          const Json* value = member(*recovery, key);
          return value && value->is_number() ? std::optional<double>(value->get<double>()) : std::nullopt;
        };
        const auto step = [&](const char* key) -> std::optional<long long> {
          const Json* value = member(*recovery, key);
          return value && value->is_number_integer() ? std::optional<long long>(value->get<long long>()) : std::nullopt;
        };
        r.detected_s = seconds("detected_s");
        r.stopped_s = seconds("stopped_s");
        r.rendezvous_s = seconds("rendezvous_s");
        r.first_step_s = seconds("first_step_s");
        r.last_step = step("last_step");
        r.resumed_step = step("resumed_step");
        r.steps_lost = step("steps_lost");
        const Json* from = member(*recovery, "resumed_step_from");
        r.resumed_step_exact = from && from->is_string() && from->get<std::string>() == "workers";
        if (const Json* source = member(*recovery, "resumed_from"); source && source->is_string()) {
          r.resumed_from = parse_start_source(source->get<std::string>());
        }
        round.recovery = r;
      }
      if (const Json* nodes = member(item, "nodes"); nodes && nodes->is_array()) {
        for (const Json& node : *nodes) {
          if (!node.is_object()) throw Error(where + ": a node is not an object");
          round.nodes.push_back(
              {read_as<int>(node, "node_rank", where), read_as<std::string>(node, "host", where, false),
               read_as<std::string>(node, "address", where, false), read_as<int>(node, "first_rank", where, false),
               read_as<int>(node, "nproc", where, false)});
        }
      }
      r.rounds.push_back(std::move(round));
    }
  }
  return r;
}

void write_run_record(const std::string& run_dir, const RunRecord& record) {
  write_file_atomically(log_layout::run_json(run_dir), run_record_to_json(record));
}

std::optional<RunRecord> read_run_record(const std::string& run_dir) {
  const std::string path = log_layout::run_json(run_dir);
  std::error_code error;
  if (!fs::exists(path, error)) return std::nullopt;
  return parse_run_record(read_file(path), path);
}

LauncherIdentity this_launcher() {
  LauncherIdentity self;
  self.pid = static_cast<long>(getpid());
  self.host = host_name();
  self.boot_id = boot_id();
  self.start_ticks = process_start_ticks(self.pid);
  return self;
}

RunRecord start_run_record(const std::string& run_id, const std::vector<std::string>& hosts, int nnodes,
                           int world_size) {
  RunRecord r;
  r.run_id = run_id;
  r.status = "running";
  r.command_line = own_command_line();
  std::error_code error;
  r.cwd = fs::current_path(error).string();
  r.hosts = hosts;
  r.nnodes = nnodes;
  r.world_size = world_size;
  r.start_time = unix_seconds_now();
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
  record.end_time = unix_seconds_now();
  record.attempts = attempts;
}

std::string keep_earlier_run_record(const std::string& run_dir, const std::string& archive_dir) {
  const fs::path current = log_layout::run_json(run_dir);
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
  const fs::path target = log_layout::run_json(archive.string());
  fs::rename(current, target, error);
  if (error) throw Error("cannot move " + current.string() + " to " + target.string() + ": " + error.message());
  return archive.string();
}

RunRecorder::RunRecorder(std::string run_dir, RunRecord record)
    : run_dir_(std::move(run_dir)), record_(std::move(record)) {
  write_run_record(run_dir_, record_);
}

RunRecorder::~RunRecorder() {
  if (finished_) return;
  try {
    finish_run_record(record_, "failed", 1, record_.attempts);
    write_run_record(run_dir_, record_);
  } catch (...) {}
}

std::string RunRecorder::finish(const std::string& status, int exit_code, int attempts) {
  finished_ = true;
  finish_run_record(record_, status, exit_code, attempts);
  return write_now();  // the caller prints a warning
}

std::string RunRecorder::set_rounds(std::vector<RoundEntry> rounds) {
  if (!rounds.empty()) {
    const RoundEntry& newest = rounds.back();
    record_.hosts.clear();
    for (const RoundEntry::Node& node : newest.nodes) record_.hosts.push_back(node.host);
    record_.nnodes = static_cast<int>(newest.nodes.size());
    record_.world_size = newest.world_size;
  }
  record_.rounds = std::move(rounds);
  return rewrite();
}

std::string RunRecorder::set_replication(std::vector<NodeReplication> replication) {
  record_.replication = std::move(replication);
  return rewrite();
}

std::string RunRecorder::set_resumes(std::vector<ResumeRecord> resumes) {
  record_.resumes = std::move(resumes);
  return rewrite();
}

std::string RunRecorder::set_stragglers(std::vector<StragglerRecord> stragglers) {
  record_.stragglers = std::move(stragglers);
  return rewrite();
}

std::string RunRecorder::rewrite() {
  if (finished_) return "";  // finish() wrote the outcome; the record is not reopened
  return write_now();
}

std::string RunRecorder::write_now() {
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
