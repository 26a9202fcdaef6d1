// fork/exec of a worker with the launcher's safety settings applied in the child before exec.
#include "process/worker_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "process/orphan_guard.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace mgtrain {
namespace {

Pipe make_pipe_for(const char* purpose) {
  try {
    return make_pipe();
  } catch (const SystemError& error) {
    throw SystemError(std::string("pipe2() for ") + purpose, error.error_number());
  }
}

// A pseudo-terminal pair (posix_openpt: glibc itself, no libutil) as {master, slave}, both close-on-exec and
// neither our controlling terminal. The slave gets `size` and no output post-processing (ONLCR off), so the
// worker's bytes arrive as written.
Pipe make_pseudo_terminal(const winsize& size, const char* purpose) {
  auto fail = [purpose](const char* call) { throw SystemError(std::string(call) + " for " + purpose, errno); };
  Fd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master) fail("posix_openpt()");
  if (grantpt(master.get()) != 0) fail("grantpt()");
  if (unlockpt(master.get()) != 0) fail("unlockpt()");
  char name[128];
  if (ptsname_r(master.get(), name, sizeof name) != 0) fail("ptsname_r()");
  Fd slave(open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave) fail("open() of the pseudo-terminal");
  termios settings{};
  if (tcgetattr(slave.get(), &settings) != 0) fail("tcgetattr()");
  settings.c_oflag &= ~static_cast<tcflag_t>(ONLCR);
  if (tcsetattr(slave.get(), TCSANOW, &settings) != 0) fail("tcsetattr()");
  if (ioctl(slave.get(), TIOCSWINSZ, &size) != 0) fail("ioctl(TIOCSWINSZ)");
  return Pipe{std::move(master), std::move(slave)};
}

// The stream's pipe, or its pseudo-terminal as {read: master, write: slave}.
Pipe make_stream(bool terminal, const winsize& size, const char* purpose) {
  return terminal ? make_pseudo_terminal(size, purpose) : make_pipe_for(purpose);
}

[[noreturn]] void report_failure_and_exit(int report_fd, int err) {
  ssize_t ignored = write(report_fd, &err, sizeof err);
  (void)ignored;
  _exit(127);
}

// In the child, between fork and exec: only async-signal-safe calls. The child execs or _exits, so the
// parent's Fd objects (copied by fork) never run their destructors here; exec closes them (O_CLOEXEC).
[[noreturn]] void exec_child(const WorkerProcessSpec& spec, char* const argv[], char* const envp[], pid_t parent,
                             int stdout_fd, int stderr_fd, int stdin_fd, int report_fd) {
  auto fail = [report_fd](int err) { report_failure_and_exit(report_fd, err); };
  if (spec.grouping == ProcessGrouping::kOwnSession && setsid() < 0) fail(errno);
  if (spec.grouping == ProcessGrouping::kOwnGroup && setpgid(0, 0) != 0) fail(errno);
  if (spec.die_with_parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
    if (getppid() != parent) _exit(128 + SIGKILL);  // the launcher died before PDEATHSIG was armed
  }
  if (!spec.working_directory.empty() && chdir(spec.working_directory.c_str()) != 0) fail(errno);
  if (spec.announce_fd >= 0) {
    char line[OrphanGuard::kMessageSize];
    const std::size_t length = OrphanGuard::message_line(true, getpid(), line);
    if (write(spec.announce_fd, line, length) != static_cast<ssize_t>(length)) fail(errno);
  }
  if (dup2(stdin_fd, STDIN_FILENO) < 0 || dup2(stdout_fd, STDOUT_FILENO) < 0 || dup2(stderr_fd, STDERR_FILENO) < 0) {
    fail(errno);
  }
  for (const int fd : spec.pass_fds) {
    if (fcntl(fd, F_SETFD, 0) != 0) fail(errno);
  }
  // Every signal's default disposition and none blocked, whatever the launcher inherited or set (it ignores SIGPIPE
  // and blocks the signals it reads from its signalfd; a script's `mgtrain launch ... &` starts it with SIGINT and
  // SIGQUIT ignored, which a worker would otherwise keep across exec, and then ignore the launcher's SIGINT).
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &default_action, nullptr);  // glibc's own ones: EINVAL
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execvpe(argv[0], argv, envp);
  report_failure_and_exit(report_fd, errno);
}

}  // namespace

WorkerProcess start_child(const WorkerProcessSpec& spec) {
  if (spec.argv.empty()) throw UsageError("the command to run is empty");
  for (const int fd : spec.pass_fds) {
    if (fd < 3) throw Error("internal error: descriptor " + std::to_string(fd) + " cannot be passed to a child");
  }
  std::vector<char*> argv, envp;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  for (const std::string& entry : spec.environment) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);

  Fd stdin_fd(spec.stdin_fd >= 0 ? fcntl(spec.stdin_fd, F_DUPFD_CLOEXEC, 3) : open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!stdin_fd) throw SystemError(spec.stdin_fd >= 0 ? "dup of the worker's stdin" : "open(/dev/null)", errno);
  Pipe out = make_stream(spec.stdout_terminal, spec.terminal_size, "worker stdout");
  Pipe err = make_stream(spec.stderr_terminal, spec.terminal_size, "worker stderr");
  Pipe report = make_pipe_for("exec status");
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    exec_child(spec, argv.data(), envp.data(), parent, out.write.get(), err.write.get(), stdin_fd.get(),
               report.write.get());
  }
  int fork_errno = errno;
  stdin_fd.reset();
  out.write.reset();
  err.write.reset();
  report.write.reset();
  if (pid < 0) throw SystemError("fork() for '" + spec.argv[0] + "'", fork_errno);
  // Also done by the child; whichever runs first wins the race with kill(-pid). A session the child makes itself
  // (setsid fails in a process that already leads a group); the exec report below waits for it.
  if (spec.grouping == ProcessGrouping::kOwnGroup) setpgid(pid, pid);

  int exec_errno = 0;
  ssize_t got;
  do {
    got = read(report.read.get(), &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  report.read.reset();
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    waitpid(pid, nullptr, 0);
    throw ExecError("cannot start " + spec.argv[0], exec_errno);
  }
  fcntl(out.read.get(), F_SETFL, O_NONBLOCK);
  fcntl(err.read.get(), F_SETFL, O_NONBLOCK);
  WorkerProcess process;
  process.pid = pid;
  process.stdout_pipe = std::move(out.read);
  process.stderr_pipe = std::move(err.read);
  return process;
}

WorkerProcess start_worker_process(const WorkerProcessSpec& spec) {
  if (spec.argv.empty()) throw UsageError("worker command is empty");
  try {
    return start_child(spec);
  } catch (const ExecError& error) {
    const int exec_errno = error.error_number();
    std::string message = "cannot run worker command '" + spec.argv[0] + "': " + std::strerror(exec_errno);
    if (exec_errno == ENOENT || exec_errno == EACCES || exec_errno == ENOEXEC || exec_errno == ENOTDIR) {
      throw UsageError(message + ": check the program after `--` (it must be an executable file or on PATH)");
    }
    throw Error(message);
  }
}

void signal_process_group(pid_t pgid, int signal) {
  if (pgid > 0) kill(-pgid, signal);
}

bool peek_exit(pid_t pid, ExitStatus& status) {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno == ECHILD) {  // already reaped elsewhere: its status is gone, so it counts as failed (255)
      log::warn(
          "worker pid {} was reaped outside the launcher (SIGCHLD ignored or waited for elsewhere): its exit status "
          "is lost and counts as 255",
          pid);
      status = ExitStatus::exited(255);
      return true;
    }
    return false;
  }
  if (info.si_pid == 0) return false;
  status = info.si_code == CLD_EXITED ? ExitStatus::exited(info.si_status) : ExitStatus::killed_by(info.si_status);
  return true;
}

void reap(pid_t pid) {
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {}
}

std::optional<ExitStatus> collect_exit(pid_t pid, OrphanGuard& guard) {
  ExitStatus status;
  if (!peek_exit(pid, status)) return std::nullopt;
  signal_process_group(pid, SIGKILL);
  reap(pid);
  guard.forget(pid);
  return status;
}

}  // namespace mgtrain
