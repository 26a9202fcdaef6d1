// A node's diagnosis of its ranks: flight recorder request, stacks, top frames, trace files (see rank_diagnosis.hpp).
#include "diagnose/rank_diagnosis.hpp"

#include <algorithm>

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

RankDiagnosisRun::RankDiagnosisRun(const std::vector<RankProcess>& ranks, std::string attempt_directory,
                                   Clock::time_point deadline, bool flight_recorder, int stacks_number,
                                   const DumpOptions& options)
    : ranks_(ranks),
      attempt_directory_(std::move(attempt_directory)),
      deadline_(deadline),
      started_(Clock::now()),
      flight_recorder_(flight_recorder) {
  // First the flight recorder: torch's monitor thread dumps while the stacks are taken.
  for (const RankProcess& rank : ranks_) {
    asked_.push_back(flight_recorder && request_flight_recorder_dump(rank.rank_directory) > 0);
    const std::string stacks = stacks_number > 0
                                   ? log_layout::stacks_on_request_file(rank.rank_directory, stacks_number)
                                   : log_layout::stacks_file(rank.rank_directory);
    dumps_.push_back(std::make_unique<StackDump>(
        DumpTarget{rank.pid, rank.rank, rank.kind, stacks,
                   rank.python_hook_armed ? log_layout::faulthandler_file(rank.rank_directory) : ""},
        deadline, options));
  }
  if (dumps_done() && traces_written()) finish();
}

bool RankDiagnosisRun::dumps_done() const {
  return std::all_of(dumps_.begin(), dumps_.end(), [](const auto& dump) { return dump->done(); });
}

bool RankDiagnosisRun::traces_written() const {
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (asked_[i] && flight_recorder_files(ranks_[i].rank_directory).empty()) return false;
  }
  return true;
}

void RankDiagnosisRun::add_fds(std::vector<pollfd>& fds) {
  for (const auto& dump : dumps_) dump->add_fds(fds);
}

void RankDiagnosisRun::on_ready(const pollfd& ready, LoopTime now) {
  for (const auto& dump : dumps_) dump->on_ready(ready, now);  // each passes on only its own descriptors
}

std::optional<LoopTime> RankDiagnosisRun::next_deadline() const {
  if (done_) return std::nullopt;
  std::optional<LoopTime> wake = deadline_;
  for (const auto& dump : dumps_) keep_earliest(wake, dump->next_deadline());
  // The stacks are taken: the asked ranks' trace files are looked for every kPoll.
  if (dumps_done()) keep_earliest(wake, Clock::now() + kPoll);
  return wake;
}

void RankDiagnosisRun::on_time(LoopTime now) {
  if (done_) return;
  for (const auto& dump : dumps_) dump->on_time(now);
  if (!dumps_done()) return;
  if (traces_written() || now + kPoll >= deadline_) finish();
}

void RankDiagnosisRun::finish() {
  done_ = true;
  std::vector<std::string> rank_directories;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    diagnosis_.ranks.push_back(
        RankDiagnosis{ranks_[i].rank, dumps_[i]->result(), flight_recorder_files(ranks_[i].rank_directory)});
    rank_directories.push_back(ranks_[i].rank_directory);
  }
  dumps_.clear();
  if (flight_recorder_) {
    diagnosis_.flight_recorder_gathered =
        gather_flight_recorder_files(rank_directories, log_layout::flight_recorder_dir(attempt_directory_));
  }
  if (!diagnosis_.flight_recorder_gathered.empty()) {
    diagnosis_.flight_recorder_folder = log_layout::flight_recorder_dir(attempt_directory_);
  }
  diagnosis_.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
}

}  // namespace mgtrain::diagnose
