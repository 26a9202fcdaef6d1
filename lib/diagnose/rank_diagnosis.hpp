// Everything a node collects about its ranks before a hung job is stopped, or on request, as one participant of the
// launcher's event loop: NCCL's flight recorder asked to dump through its pipes, every rank's stacks file (the ranks
// side by side, each a StackDump), each rank's top frames, and the flight recorder dumps gathered into
// attempt_N/flight_recorder/ for torch's reader. A hang's diagnostics and POST /stacks both run one
// (launch/rank_diagnostics.hpp, the one room where a node's ranks are dumped).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "diagnose/stack_dump.hpp"
#include "util/environment.hpp"

namespace mgtrain::diagnose {

struct RankProcess {
  int rank = -1;  // global rank
  pid_t pid = -1;
  ProgramKind kind = ProgramKind::native;
  std::string rank_directory;      // attempt_N/rank_R
  bool python_hook_armed = false;  // started with python_hook_environment
};

struct RankDiagnosis {
  int rank = -1;
  DumpResult dump;                                 // stacks.txt, its notes and top frames
  std::vector<std::string> flight_recorder_files;  // this rank's dumps in its own folder
};

struct NodeDiagnosis {
  std::vector<RankDiagnosis> ranks;                   // in the order asked
  std::string flight_recorder_folder;                 // attempt_N/flight_recorder, "" when there was no dump
  std::vector<std::string> flight_recorder_gathered;  // the copies there
  double seconds = 0.0;
};

// Everything diagnostics add to one worker's environment `environment` (not changed), for the rank whose folder is
// `rank_directory`: the Python hook's variables (python_hook_environment; harmless for a program that is not Python)
// and the flight recorder's (flight_recorder_environment: only those the user did not set). Pure. The hook itself
// is written once per run with write_python_hook(hook_directory).
EnvMap diagnostics_environment(const EnvMap& environment, const std::string& hook_directory,
                               const std::string& rank_directory);

// Asks each rank's NCCL flight recorder to dump (where its pipe listens: when `flight_recorder`), dumps every rank's
// stacks at once, then waits (until the deadline at most) for the asked ranks' trace files, and gathers them. Done by
// the deadline. `stacks_number` 0 writes each rank's stacks.txt (a hang's), K its stacks-K.txt (on request).
class RankDiagnosisRun final : public LoopParticipant {
 public:
  RankDiagnosisRun(const std::vector<RankProcess>& ranks, std::string attempt_directory, Clock::time_point deadline,
                   bool flight_recorder, int stacks_number, const DumpOptions& options = {});

  void add_fds(std::vector<pollfd>& fds) override;
  void on_ready(const pollfd& ready, LoopTime now) override;
  std::optional<LoopTime> next_deadline() const override;
  void on_time(LoopTime now) override;

  bool done() const { return done_; }
  // After done().
  const NodeDiagnosis& result() const { return diagnosis_; }

 private:
  bool dumps_done() const;
  bool traces_written() const;
  void finish();

  std::vector<RankProcess> ranks_;
  std::string attempt_directory_;
  Clock::time_point deadline_;
  Clock::time_point started_;
  bool flight_recorder_;
  std::vector<bool> asked_;  // each rank's flight recorder was asked to dump
  std::vector<std::unique_ptr<StackDump>> dumps_;
  bool done_ = false;
  NodeDiagnosis diagnosis_;
};

}  // namespace mgtrain::diagnose
