// Stack dumps of running workers without stopping them: dump_stacks writes every thread's stack of one process into
// its rank's stacks.txt before a deadline, and says what it got and why not.
//
//   Python frames: the interpreter itself, through faulthandler armed by mgtrain's sitecustomize hook
//                  (diagnose/python_hook.hpp): the stack signal is sent, and the new part of the rank's
//                  faulthandler.txt is copied in. No package, no ptrace; works while the process is blocked in C.
//   native frames: `eu-stack -p PID` (elfutils, libdw): every thread's symbolised backtrace, for mgtrain-worker,
//                  any native program, and the C frames of a Python interpreter. It attaches with ptrace for the
//                  milliseconds of the walk and detaches; the launcher runs it as a child and links nothing of it.
//                  Absent eu-stack or ptrace permission is a note, not an error.
//
// Callers: hang detection (collect_diagnostics with a deadline), later `mgtrain status --stacks` and a dump ordered
// over the rendezvous connection; all call dump_stacks_all with the local ranks' targets. It blocks until every
// dump is done or the deadline passes (each process is dumped concurrently, in a thread of its own), never longer.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "diagnose/process_facts.hpp"

namespace mgtrain::diagnose {

using Clock = std::chrono::steady_clock;

struct DumpTarget {
  pid_t pid = -1;
  int rank = -1;  // global rank, for the header and notes (-1: not a rank)
  ProgramKind kind = ProgramKind::native;
  std::string output_path;        // stacks.txt; written even when no stack could be taken (then with the notes)
  std::string faulthandler_path;  // python: the file its armed hook appends to (faulthandler_file); "" when not armed
};

// How the eu-stack half is found and bounded.
struct DumpOptions {
  std::string eu_stack = "eu-stack";  // searched on PATH when it has no '/'; "" turns native frames off
  int max_frames_per_thread = 64;
};

enum class DumpOutcome {
  complete,  // every kind of frame this target's kind has (python: Python and native; native: native)
  partial,   // some frames, some missing (see notes)
  failed,    // no frames at all (see notes); stacks.txt holds the notes
};

struct DumpResult {
  DumpOutcome outcome = DumpOutcome::failed;
  bool python_frames = false;
  bool native_frames = false;
  std::vector<std::string> notes;  // whole sentences: what was missing and why ("rank 3 (pid 41): ...")
  double seconds = 0.0;            // how long the dump took
  std::string output_path;         // stacks.txt, or "" when even the notes could not be written
  // The saved text's top frames (top_frames.hpp), computed here once: the failure report, the status API and the
  // stacks' word on a hang (hang_watch.hpp, settled_by_stacks) all take them from here.
  std::vector<std::string> top_frames;
};

// Dumps one process's stacks into target.output_path (atomically: the file appears complete) before `deadline`.
// Never throws for the target's sake (gone, stopped, not armed, no permission, too slow): those are notes.
DumpResult dump_stacks(const DumpTarget& target, Clock::time_point deadline, const DumpOptions& options = {});

// dump_stacks of every target at once (a thread each); results in the targets' order.
std::vector<DumpResult> dump_stacks_all(const std::vector<DumpTarget>& targets, Clock::time_point deadline,
                                        const DumpOptions& options = {});

// The path of `program` (with a '/': itself, if executable) on `path_variable`'s folders, or "".
std::string find_program(const std::string& program, const std::string& path_variable);

}  // namespace mgtrain::diagnose
