// A node's hang diagnostics on a thread of their own (see rank_diagnostics.hpp).
#include "launch/rank_diagnostics.hpp"

#include <filesystem>

#include "diagnose/process_facts.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/time_format.hpp"

namespace mgtrain {

RankDiagnostics::~RankDiagnostics() { join(); }

void RankDiagnostics::join() {
  if (worker_.joinable()) worker_.join();
}

void RankDiagnostics::collect_diagnostics(int attempt, const std::vector<Target>& ranks,
                                          std::chrono::steady_clock::time_point deadline) {
  join();  // a previous attempt's collection ended by its own deadline
  attempt_ = attempt;
  std::vector<diagnose::RankProcess> processes;
  for (const Target& target : ranks) {
    diagnose::RankProcess process;
    process.rank = target.global_rank;
    process.pid = target.pid;
    process.kind = diagnose::guess_program_kind(target.pid);
    process.rank_directory = target.rank_directory;
    process.python_hook_armed = process.kind == diagnose::ProgramKind::python;  // worker_env gave it the hook
    processes.push_back(std::move(process));
  }
  attempt_directory_ =
      ranks.empty() ? std::string() : std::filesystem::path(ranks.front().rank_directory).parent_path().string();
  finished_ = false;
  reported_ = false;
  worker_ = std::thread([this, processes = std::move(processes), deadline] {
    try {
      std::unique_lock<std::timed_mutex> lock(dump_lock_, deadline);  // an on-demand dump ends first
      if (!lock.owns_lock()) throw Error("an on-demand dump (POST /stacks) held the ranks until the deadline");
      last_ = diagnose::diagnose_ranks(processes, attempt_directory_, deadline);
    } catch (const std::exception& error) {  // reported by done(): the workers are stopped all the same
      last_ = diagnose::NodeDiagnosis{};
      last_.ranks.push_back(diagnose::RankDiagnosis{-1, diagnose::DumpResult{}, {}});
      last_.ranks.back().dump.notes.push_back(std::string("the stacks could not be collected: ") + error.what());
    }
    finished_ = true;
  });
}

bool RankDiagnostics::done() {
  if (!finished_) return false;
  if (!std::exchange(reported_, true)) {
    join();
    for (const std::string& line : diagnosis_summary(last_, attempt_directory_)) log::info("{}", line);
  }
  return true;
}

std::vector<std::string> RankDiagnostics::top_frames_of(int attempt, int global_rank) const {
  if (!finished_ || attempt != attempt_) return {};
  for (const diagnose::RankDiagnosis& rank : last_.ranks) {
    if (rank.rank == global_rank) return rank.dump.top_frames;
  }
  return {};
}

std::vector<std::string> diagnosis_summary(const diagnose::NodeDiagnosis& diagnosis, const std::string& attempt_dir) {
  std::vector<std::string> lines;
  std::size_t written = 0;
  for (const diagnose::RankDiagnosis& rank : diagnosis.ranks) {
    if (!rank.dump.output_path.empty() && rank.rank >= 0) ++written;
  }
  lines.push_back("stacks of " + std::to_string(written) + " rank" + (written == 1 ? "" : "s") + " in " + attempt_dir +
                  "/rank_*/stacks.txt (" + format_seconds(diagnosis.seconds) + ")");
  for (const diagnose::RankDiagnosis& rank : diagnosis.ranks) {
    for (const std::string& note : rank.dump.notes) lines.push_back(note);
  }
  if (!diagnosis.flight_recorder_folder.empty()) {
    lines.push_back("NCCL flight recorder dumps of " + std::to_string(diagnosis.flight_recorder_gathered.size()) +
                    " rank(s) in " + diagnosis.flight_recorder_folder + " (read them with torchfrtrace)");
  }
  return lines;
}

}  // namespace mgtrain
