// POST /stacks's dump of a single node's running ranks (see stacks_on_demand.hpp).
#include "launch/stacks_on_demand.hpp"

#include <unistd.h>

#include <algorithm>
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

rdzv::NodeStacks node_stacks_of(const StacksDump& dump) {
  rdzv::NodeStacks stacks;
  switch (dump.outcome) {
    case StacksOutcome::kDumped:
      stacks.outcome = rdzv::NodeStacksOutcome::kDumped;
      break;
    case StacksOutcome::kBusy:
      stacks.outcome = rdzv::NodeStacksOutcome::kBusy;
      break;
    case StacksOutcome::kNotRunning:
      stacks.outcome = rdzv::NodeStacksOutcome::kNotRunning;
      break;
  }
  stacks.message = dump.message;
  stacks.attempt = dump.attempt;
  stacks.time = dump.time;
  stacks.seconds = dump.seconds;
  for (const RankStacks& rank : dump.ranks) {
    rdzv::RankStacksRow row;
    row.rank = rank.rank;
    row.local_rank = rank.local_rank;
    row.pid = rank.pid;
    row.outcome = rank.outcome;
    row.python_frames = rank.python_frames;
    row.native_frames = rank.native_frames;
    row.seconds = rank.seconds;
    row.stacks_file = rank.stacks_file;
    row.top_frames = rank.top_frames;
    row.notes = rank.notes;
    stacks.ranks.push_back(std::move(row));
  }
  return stacks;
}

StacksDump job_stacks_dump(const rdzv::JobStacks& job) {
  StacksDump dump;
  dump.attempt = job.round;
  dump.seconds = job.seconds;
  std::vector<std::string> not_dumped;  // the nodes that answered but dumped nothing
  bool any_busy = false;
  for (const rdzv::NodeStacks& node : job.nodes) {
    const std::string name = "node " + std::to_string(node.node_rank) + " (" + node.host + ")";
    if (node.outcome != rdzv::NodeStacksOutcome::kDumped) {
      any_busy = any_busy || node.outcome == rdzv::NodeStacksOutcome::kBusy;
      not_dumped.push_back(name + ": " + node.message);
      continue;
    }
    if (dump.time == 0 || (node.time > 0 && node.time < dump.time)) dump.time = node.time;
    for (const rdzv::RankStacksRow& row : node.ranks) {
      RankStacks rank;
      rank.rank = row.rank;
      rank.local_rank = row.local_rank;
      rank.pid = static_cast<pid_t>(row.pid);
      rank.stacks_file = row.stacks_file;
      rank.outcome = row.outcome;
      rank.python_frames = row.python_frames;
      rank.native_frames = row.native_frames;
      rank.top_frames = row.top_frames;
      rank.notes = row.notes;
      rank.seconds = row.seconds;
      rank.node_rank = node.node_rank;
      rank.host = node.host;
      dump.ranks.push_back(std::move(rank));
    }
    if (node.ranks_left_out > 0) {
      dump.notes.push_back(name + ": " + std::to_string(node.ranks_left_out) +
                           " more ranks dumped, not listed here (their stacks files are in the node's attempt folder)");
    }
  }
  std::stable_sort(dump.ranks.begin(), dump.ranks.end(),
                   [](const RankStacks& a, const RankStacks& b) { return a.rank < b.rank; });
  dump.notes.insert(dump.notes.end(), not_dumped.begin(), not_dumped.end());
  dump.notes.insert(dump.notes.end(), job.unanswered.begin(), job.unanswered.end());
  if (dump.ranks.empty()) {  // nothing was dumped anywhere: say why as the error
    dump.outcome = any_busy ? StacksOutcome::kBusy : StacksOutcome::kNotRunning;
    dump.message = dump.notes.empty() ? std::string("no node of the job dumped a rank") : dump.notes.front();
    for (std::size_t i = 1; i < dump.notes.size(); ++i) dump.message += "; " + dump.notes[i];
  }
  return dump;
}

StacksDump job_stacks_refusal(const rdzv::StacksRefusal& refusal) {
  StacksDump dump;
  dump.outcome = refusal.busy ? StacksOutcome::kBusy : StacksOutcome::kNotRunning;
  dump.message = refusal.why;
  return dump;
}

}  // namespace mgtrain
