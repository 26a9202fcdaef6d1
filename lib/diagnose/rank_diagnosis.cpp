// A node's diagnosis of its ranks: flight recorder request, stacks, top frames, trace files (see rank_diagnosis.hpp).
#include "diagnose/rank_diagnosis.hpp"

#include <thread>

#include "contract/log_layout.hpp"
#include "diagnose/flight_recorder.hpp"
#include "diagnose/python_hook.hpp"
#include "diagnose/top_frames.hpp"
#include "util/file_io.hpp"

namespace mgtrain::diagnose {

namespace {
constexpr auto kPoll = std::chrono::milliseconds(50);
}  // namespace

EnvMap diagnostics_environment(const EnvMap& environment, const std::string& hook_directory,
                               const std::string& rank_directory) {
  EnvMap added = python_hook_environment(environment, hook_directory, rank_directory);
  for (auto& [name, value] : flight_recorder_environment(environment, rank_directory)) added[name] = value;
  return added;
}

NodeDiagnosis diagnose_ranks(const std::vector<RankProcess>& ranks, const std::string& attempt_directory,
                             Clock::time_point deadline, const DumpOptions& options) {
  const auto started = Clock::now();
  NodeDiagnosis diagnosis;
  // First the flight recorder: torch's monitor thread dumps while the stacks are taken.
  std::vector<bool> asked;
  std::vector<DumpTarget> targets;
  for (const auto& rank : ranks) {
    asked.push_back(request_flight_recorder_dump(rank.rank_directory) > 0);
    targets.push_back(DumpTarget{rank.pid, rank.rank, rank.kind, log_layout::stacks_file(rank.rank_directory),
                                 rank.python_hook_armed ? log_layout::faulthandler_file(rank.rank_directory) : ""});
  }
  std::vector<DumpResult> dumps = dump_stacks_all(targets, deadline, options);
  // Then the asked ranks' trace files, until each has one or the deadline.
  auto all_dumped = [&] {
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (asked[i] && flight_recorder_files(ranks[i].rank_directory).empty()) return false;
    }
    return true;
  };
  while (!all_dumped() && Clock::now() + kPoll < deadline) std::this_thread::sleep_for(kPoll);

  std::vector<std::string> rank_directories;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    diagnosis.ranks.push_back(
        RankDiagnosis{ranks[i].rank, std::move(dumps[i]), flight_recorder_files(ranks[i].rank_directory)});
    rank_directories.push_back(ranks[i].rank_directory);
  }
  diagnosis.flight_recorder_gathered =
      gather_flight_recorder_files(rank_directories, log_layout::flight_recorder_dir(attempt_directory));
  if (!diagnosis.flight_recorder_gathered.empty()) {
    diagnosis.flight_recorder_folder = log_layout::flight_recorder_dir(attempt_directory);
  }
  diagnosis.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return diagnosis;
}

}  // namespace mgtrain::diagnose
