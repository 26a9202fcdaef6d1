// A short-lived helper program whose output is captured (started through start_child, worker_process.hpp): eu-stack
// for a hang's stacks runs as a HelperRun on the launcher's event loop; `mgtrain env` (the worker binary's LibTorch
// facts), scontrol and the tests run one to completion with run_and_capture. Not for workers: those are the loop's
// children.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "process/event_loop.hpp"
#include "process/worker_process.hpp"

namespace mgtrain {

struct CaptureOptions {
  double timeout_s = 60.0;                     // then SIGKILL
  std::map<std::string, std::string> set_env;  // added to (or replacing in) the inherited environment
  std::vector<std::string> unset_env;          // removed from it
  std::string working_directory;               // empty: inherit
  // The child leads a process group of its own, and the timeout's SIGKILL goes to the whole group: for programs
  // that start others (a launcher and its workers), which would otherwise outlive the timeout holding the pipes.
  bool own_process_group = false;
};

struct CapturedRun {
  int exit_code = -1;  // -1: ended by a signal (see signal) or by the timeout
  int signal = 0;
  bool timed_out = false;
  std::string out;  // stdout
  std::string err;  // stderr
};

// One helper program as a loop participant: started by the constructor, its stdout and stderr read as they come,
// killed (SIGKILL) when options.timeout_s has passed, reaped without blocking the loop once its pipes have closed.
class HelperRun final : public LoopParticipant {
 public:
  // Throws ExecError when the program cannot be executed, SystemError when a system call fails.
  HelperRun(const std::vector<std::string>& argv, const CaptureOptions& options);
  // One still running is killed and reaped.
  ~HelperRun() override;
  HelperRun(const HelperRun&) = delete;
  HelperRun& operator=(const HelperRun&) = delete;

  void add_fds(std::vector<pollfd>& fds) override;
  void on_ready(const pollfd& ready, LoopTime now) override;  // a descriptor not its own is ignored
  std::optional<LoopTime> next_deadline() const override;
  void on_time(LoopTime now) override;

  // Whether it has exited (or was killed) and was reaped: result() is final.
  bool done() const { return reaped_; }
  const CapturedRun& result() const { return result_; }

 private:
  void kill_child();
  void reap(bool block);

  WorkerProcess child_;
  bool own_group_;
  LoopTime deadline_;
  CapturedRun result_;
  std::optional<LoopTime> next_reap_;  // both pipes closed, not yet exited: look again then
  bool reaped_ = false;
};

// A HelperRun to its end: waits until it exited and closed its output, or its timeout.
CapturedRun run_and_capture(const std::vector<std::string>& argv, const CaptureOptions& options = {});

}  // namespace mgtrain
