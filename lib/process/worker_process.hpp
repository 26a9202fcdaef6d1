// Starting a child: the one fork and exec of a program in mgtrain, for workers (their own process group, death with
// the launcher by PR_SET_PDEATHSIG, stdout and stderr through pipes or pseudo-terminals: launch.tty) and helper
// programs (run_capture.hpp). Every child gets every signal's default disposition, an empty signal mask and stdin
// from /dev/null unless told otherwise. Plus signalling and reaping it.
#pragma once

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/fd.hpp"

namespace mgtrain {

// Where a child stands among the launcher's processes.
enum class ProcessGrouping {
  kParent,      // in the launcher's process group (a helper a test runs from a thread of its own)
  kOwnGroup,    // a process group of its own in the launcher's session
  kOwnSession,  // a session (and so a process group) of its own, as torchrun starts its workers
                // (start_new_session=True): with the kernel's autogroup on, each worker is a scheduling group of its
                // own, so the CPU it gets does not shrink with every other program of the launcher's session
};

struct WorkerProcessSpec {
  std::vector<std::string> argv;         // argv[0] is looked up on PATH like execvp
  std::vector<std::string> environment;  // "KEY=VALUE"
  // If >= 0: before exec, the child writes its pid (OrphanGuard::message_line) to this pipe, so that the orphan guard
  // knows the new process group before any of the worker's own code runs (OrphanGuard::announce_fd).
  int announce_fd = -1;
  // If >= 0: the child's stdin (the caller keeps and closes it); else /dev/null.
  int stdin_fd = -1;
  // Descriptors the child keeps across exec under the same numbers (each >= 3; the child clears their
  // close-on-exec flag; the caller keeps and closes its own): a worker's snapshot store
  // (checkpoint/snapshot_stores.hpp).
  std::vector<int> pass_fds;
  // A stream marked here goes to a pseudo-terminal of its own (isatty() holds in the worker) of this size,
  // with output post-processing off (a '\n' stays a '\n'). It is not the worker's controlling terminal.
  bool stdout_terminal = false;
  bool stderr_terminal = false;
  winsize terminal_size{24, 80, 0, 0};
  std::string working_directory;  // "": the launcher's
  // Workers: kOwnSession and die_with_parent. A helper program a test runs from a thread of its own keeps its
  // parent's group and survives the end of that thread (PR_SET_PDEATHSIG fires when the parent thread ends).
  ProcessGrouping grouping = ProcessGrouping::kOwnSession;
  bool die_with_parent = true;
};

// The program could not be executed (exec's or chdir's errno, e.g. ENOENT): "cannot start <program>: <why>".
class ExecError : public SystemError {
 public:
  using SystemError::SystemError;
};

struct WorkerProcess {
  pid_t pid = -1;  // also its process group id (unless started with ProcessGrouping::kParent)
  Fd stdout_pipe;  // read ends (or pty masters: EIO means the end), non-blocking, close-on-exec
  Fd stderr_pipe;
};

// Forks and execs. Returns once the program runs; throws ExecError when it cannot be executed and SystemError
// when a system call fails.
WorkerProcess start_child(const WorkerProcessSpec& spec);
// start_child for a worker command: UsageError (naming the program after `--`) when it cannot be executed.
WorkerProcess start_worker_process(const WorkerProcessSpec& spec);

// kill(-pgid, signal); a group that is already gone is not an error.
void signal_process_group(pid_t pgid, int signal);

// If `pid` has exited, returns true and its status without reaping it (the zombie keeps the
// process group id from being reused while we kill the rest of the group).
bool peek_exit(pid_t pid, ExitStatus& status);

// Reaps an exited child.
void reap(pid_t pid);

class OrphanGuard;
// If `pid` has exited: kills the rest of its process group (the zombie still holds the group id), reaps it
// and tells `guard` to forget the group. Its status, or nullopt while it runs.
std::optional<ExitStatus> collect_exit(pid_t pid, OrphanGuard& guard);

}  // namespace mgtrain
