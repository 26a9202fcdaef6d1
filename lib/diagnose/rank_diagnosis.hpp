// One call for everything a node collects about its ranks before a hung job is stopped (or on request): NCCL's
// flight recorder asked to dump through its pipes, every rank's stacks.txt, each rank's top frames, and the flight
// recorder dumps gathered into attempt_N/flight_recorder/ for torch's reader. Hang detection's collect_diagnostics
// calls it with its deadline; `mgtrain status --stacks` and a dump ordered by another node can call it the same way.
#pragma once

#include <sys/types.h>

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

// Asks each rank's NCCL flight recorder to dump (where its pipe listens), dumps every rank's stacks at once, then
// waits (until the deadline at most) for the asked ranks' trace files, and gathers them. Returns by the deadline.
NodeDiagnosis diagnose_ranks(const std::vector<RankProcess>& ranks, const std::string& attempt_directory,
                             Clock::time_point deadline, const DumpOptions& options = {});

}  // namespace mgtrain::diagnose
