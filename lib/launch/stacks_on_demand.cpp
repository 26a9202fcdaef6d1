// POST /stacks's dump of a single node's running ranks (see stacks_on_demand.hpp).
#include "launch/stacks_on_demand.hpp"

#include <unistd.h>

#include <filesystem>
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

StacksRequest plan_stacks_request(const StatusSnapshot& snapshot) {
  StacksRequest request;
  StacksDump& dump = request.answer;
  dump.attempt = snapshot.attempt;
  std::vector<const RankStatus*> running;
  for (const RankStatus& rank : snapshot.ranks) {
    if (rank.state == "running" && rank.pid > 0) running.push_back(&rank);
  }
  if (snapshot.phase != "running" || running.empty()) {
    dump.outcome = StacksOutcome::kNotRunning;
    dump.message = "no rank of run " + snapshot.run_id + " runs now (the launcher is " +
                   (snapshot.phase.empty() ? std::string("starting") : snapshot.phase) + "): nothing to dump";
    return request;
  }
  dump.time = unix_seconds_now();
  std::vector<std::string> rank_directories;
  rank_directories.reserve(running.size());
  for (const RankStatus* rank : running) {
    rank_directories.push_back(log_layout::rank_dir(snapshot.run_dir, snapshot.attempt, rank->rank));
  }
  request.attempt_directory = log_layout::attempt_dir(snapshot.run_dir, snapshot.attempt);
  request.stacks_number = next_stacks_number(rank_directories);
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
    request.ranks.push_back(
        diagnose::RankProcess{rank.rank, rank.pid, kind, rank_directories[i], kind == diagnose::ProgramKind::python});
    request.entries.push_back(i);
  }
  return request;
}

StacksDump answer_stacks_request(StacksRequest request, const diagnose::NodeDiagnosis& diagnosis) {
  StacksDump dump = std::move(request.answer);
  for (std::size_t t = 0; t < request.entries.size() && t < diagnosis.ranks.size(); ++t) {
    RankStacks& entry = dump.ranks[request.entries[t]];
    const diagnose::DumpResult& result = diagnosis.ranks[t].dump;
    entry.stacks_file = result.output_path;
    entry.outcome = outcome_name(result.outcome);
    entry.python_frames = result.python_frames;
    entry.native_frames = result.native_frames;
    entry.notes = result.notes;
    entry.seconds = result.seconds;
    entry.top_frames = result.top_frames;
  }
  dump.seconds = diagnosis.seconds;
  return dump;
}

}  // namespace mgtrain
