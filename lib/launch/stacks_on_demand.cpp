// POST /stacks's dump of a single node's running ranks (see stacks_on_demand.hpp).
#include "launch/stacks_on_demand.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>

#include "contract/log_layout.hpp"
#include "diagnose/python_hook.hpp"
#include "diagnose/top_frames.hpp"
#include "host/process_stats.hpp"
#include "util/file_io.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
namespace {

// The parent pid of `pid`, or nullopt when it is gone.
std::optional<pid_t> parent_of(pid_t pid) {
  const std::optional<ProcStat> stat = read_proc_stat(pid);
  if (!stat || stat->state == 'Z') return std::nullopt;
  return static_cast<pid_t>(stat->parent_pid);
}

const char* outcome_name(diagnose::DumpOutcome outcome) {
  switch (outcome) {
    case diagnose::DumpOutcome::complete:
      return "complete";
    case diagnose::DumpOutcome::partial:
      return "partial";
    case diagnose::DumpOutcome::failed:
      break;
  }
  return "failed";
}

}  // namespace

int next_stacks_number(const std::vector<std::string>& rank_directories) {
  int number = 1;
  std::error_code error;
  for (bool taken = true; taken;) {
    taken = false;
    for (const std::string& directory : rank_directories) {
      if (std::filesystem::exists(log_layout::stacks_on_request_file(directory, number), error)) {
        taken = true;
        ++number;
        break;
      }
    }
  }
  return number;
}

StacksDump dump_stacks_on_demand(const StatusSnapshot& snapshot, double timeout_s, std::timed_mutex& dump_lock,
                                 const diagnose::DumpOptions& options) {
  StacksDump dump;
  dump.attempt = snapshot.attempt;
  std::vector<const RankStatus*> running;
  for (const RankStatus& rank : snapshot.ranks) {
    if (rank.state == "running" && rank.pid > 0) running.push_back(&rank);
  }
  if (snapshot.phase != "running" || running.empty()) {
    dump.outcome = StacksOutcome::kNotRunning;
    dump.message = "no rank of run " + snapshot.run_id + " runs now (the launcher is " +
                   (snapshot.phase.empty() ? std::string("starting") : snapshot.phase) + "): nothing to dump";
    return dump;
  }
  std::unique_lock<std::timed_mutex> lock(dump_lock, std::try_to_lock);
  if (!lock.owns_lock()) {
    dump.outcome = StacksOutcome::kBusy;
    dump.message =
        "the ranks' stacks are being dumped now (a hang's diagnostics or another request); ask again "
        "when that is done";
    return dump;
  }
  const auto started = diagnose::Clock::now();
  dump.time = unix_seconds_now();
  std::vector<std::string> rank_directories;
  rank_directories.reserve(running.size());
  for (const RankStatus* rank : running) {
    rank_directories.push_back(log_layout::rank_dir(snapshot.run_dir, snapshot.attempt, rank->rank));
  }
  const int number = next_stacks_number(rank_directories);
  // The ranks still this launcher's children are dumped (all at once); the others get a note.
  std::vector<diagnose::DumpTarget> targets;
  std::vector<std::size_t> dumped;  // index into `running` of each target
  for (std::size_t i = 0; i < running.size(); ++i) {
    const RankStatus& rank = *running[i];
    RankStacks entry;
    entry.rank = rank.rank;
    entry.local_rank = rank.local_rank;
    entry.pid = rank.pid;
    entry.outcome = "failed";
    dump.ranks.push_back(entry);
    if (parent_of(rank.pid) != getpid()) {
      dump.ranks.back().notes.push_back("rank " + std::to_string(rank.rank) + " (pid " + std::to_string(rank.pid) +
                                        ") ended before its stacks could be taken");
      continue;
    }
    const diagnose::ProgramKind kind = diagnose::guess_program_kind(rank.pid);
    // Python workers got the hook with their progress file (supervise/worker_env.cpp: the status server is on).
    targets.push_back(diagnose::DumpTarget{
        rank.pid, rank.rank, kind, log_layout::stacks_on_request_file(rank_directories[i], number),
        kind == diagnose::ProgramKind::python ? log_layout::faulthandler_file(rank_directories[i]) : ""});
    dumped.push_back(i);
  }
  const std::vector<diagnose::DumpResult> results =
      diagnose::dump_stacks_all(targets, started + steady_seconds(timeout_s), options);
  for (std::size_t t = 0; t < targets.size(); ++t) {
    RankStacks& entry = dump.ranks[dumped[t]];
    const diagnose::DumpResult& result = results[t];
    entry.stacks_file = result.output_path;
    entry.outcome = outcome_name(result.outcome);
    entry.python_frames = result.python_frames;
    entry.native_frames = result.native_frames;
    entry.notes = result.notes;
    entry.seconds = result.seconds;
    entry.top_frames = result.top_frames;
  }
  dump.seconds = std::chrono::duration<double>(diagnose::Clock::now() - started).count();
  return dump;
}

}  // namespace mgtrain
