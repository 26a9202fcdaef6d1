// Stack dumps of running workers without stopping them: a StackDump writes every thread's stack of one process into
// its rank's stacks file before a deadline, and says what it got and why not.
//
//   Python frames: the interpreter itself, through faulthandler armed by mgtrain's sitecustomize hook
//                  (diagnose/python_hook.hpp): the stack signal is sent, and the new part of the rank's
//                  faulthandler.txt is copied in. No package, no ptrace; works while the process is blocked in C.
//   native frames: `eu-stack -p PID` (elfutils, libdw): every thread's symbolised backtrace, for mgtrain-worker,
//                  any native program, and the C frames of a Python interpreter. It attaches with ptrace for the
//                  milliseconds of the walk and detaches; the launcher runs it as a child and links nothing of it.
//                  Absent eu-stack or ptrace permission is a note, not an error.
//
// A StackDump is a participant of the launcher's event loop (process/event_loop.hpp): it waits for faulthandler's
// answer and for eu-stack's output there, so the loop goes on (output, sockets, signals) and a node's ranks are
// dumped side by side without a thread (rank_diagnosis.hpp runs them: a hang's diagnostics and POST /stacks).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "diagnose/process_facts.hpp"
#include "process/run_capture.hpp"

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

// One process's stacks into target.output_path (atomically: the file appears complete) before `deadline`. Never
// throws for the target's sake (gone, stopped, not armed, no permission, too slow): those are notes.
class StackDump final : public LoopParticipant {
 public:
  // Starts at once: the stack signal to an armed Python process, else eu-stack.
  StackDump(DumpTarget target, Clock::time_point deadline, DumpOptions options = {});
  // An eu-stack still running is killed (and the target continued, should it be left stopped).
  ~StackDump() override;
  StackDump(const StackDump&) = delete;
  StackDump& operator=(const StackDump&) = delete;

  void add_fds(std::vector<pollfd>& fds) override;
  void on_ready(const pollfd& ready, LoopTime now) override;
  std::optional<LoopTime> next_deadline() const override;
  void on_time(LoopTime now) override;

  // Whether the dump has ended and its file is written: result() is final.
  bool done() const { return stage_ == Stage::kDone; }
  const DumpResult& result() const { return result_; }

 private:
  enum class Stage { kPython, kNative, kDone };

  void start_python();
  void python_answered(LoopTime now);  // its dump is complete, cut short or absent: then the native half
  void start_native();
  void native_answered();
  void continue_if_left_stopped() const;
  void finish();

  DumpTarget target_;
  Clock::time_point deadline_;
  DumpOptions options_;
  std::string name_;  // "rank 3 (pid 41)"
  Clock::time_point started_;
  Stage stage_ = Stage::kPython;
  DumpResult result_;
  std::string python_;
  std::string native_;
  // The Python half: faulthandler.txt's size before the signal, the most seen since, when it last grew, and how long
  // faulthandler's answer is waited for.
  long long size_before_ = 0;
  long long size_seen_ = 0;
  Clock::time_point signalled_{};
  Clock::time_point last_growth_{};
  Clock::time_point python_limit_{};
  // The native half.
  std::unique_ptr<HelperRun> eu_stack_;
  std::optional<char> state_before_native_;
  double native_budget_s_ = 0;
};

// The path of `program` (with a '/': itself, if executable) on `path_variable`'s folders, or "".
std::string find_program(const std::string& program, const std::string& path_variable);

}  // namespace mgtrain::diagnose
