// fork/exec of a worker with the launcher's safety settings applied in the child before exec.
#include "supervise/worker_process.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

struct Pipe {
  int read_end = -1;
  int write_end = -1;
};

Pipe make_pipe(const char* purpose) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw SystemError(std::string("pipe2() for ") + purpose, errno);
  return {fds[0], fds[1]};
}

void close_if_open(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

[[noreturn]] void report_failure_and_exit(int report_fd, int err) {
  ssize_t ignored = write(report_fd, &err, sizeof err);
  (void)ignored;
  _exit(127);
}

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(const WorkerProcessSpec& spec, char* const argv[], char* const envp[], pid_t parent,
                             int stdout_fd, int stderr_fd, int stdin_fd, int report_fd) {
  auto fail = [report_fd](int err) { report_failure_and_exit(report_fd, err); };
  if (setpgid(0, 0) != 0) fail(errno);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
  if (getppid() != parent) _exit(128 + SIGKILL);  // the launcher died before PDEATHSIG was armed
  if (spec.announce_fd >= 0) {
    int pid = static_cast<int>(getpid());
    if (write(spec.announce_fd, &pid, sizeof pid) != static_cast<ssize_t>(sizeof pid)) fail(errno);
  }
  if (dup2(stdin_fd, STDIN_FILENO) < 0 || dup2(stdout_fd, STDOUT_FILENO) < 0 || dup2(stderr_fd, STDERR_FILENO) < 0) {
    fail(errno);
  }
  signal(SIGPIPE, SIG_DFL);  // the launcher ignores it; workers get the default back
  sigprocmask(SIG_SETMASK, &spec.signal_mask, nullptr);
  execvpe(argv[0], argv, envp);
  report_failure_and_exit(report_fd, errno);
}

}  // namespace

WorkerProcess start_worker_process(const WorkerProcessSpec& spec) {
  if (spec.argv.empty()) throw UsageError("worker command is empty");
  std::vector<char*> argv, envp;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  for (const std::string& entry : spec.environment) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);

  int stdin_fd = spec.stdin_fd >= 0 ? fcntl(spec.stdin_fd, F_DUPFD_CLOEXEC, 3) : open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (stdin_fd < 0) throw SystemError(spec.stdin_fd >= 0 ? "dup of the worker's stdin" : "open(/dev/null)", errno);
  Pipe out, err, report;
  try {
    out = make_pipe("worker stdout");
    err = make_pipe("worker stderr");
    report = make_pipe("exec status");
  } catch (...) {
    close(stdin_fd);
    close_if_open(out.read_end), close_if_open(out.write_end);
    close_if_open(err.read_end), close_if_open(err.write_end);
    throw;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) exec_child(spec, argv.data(), envp.data(), parent, out.write_end, err.write_end, stdin_fd, report.write_end);
  int fork_errno = errno;
  close(stdin_fd);
  close_if_open(out.write_end);
  close_if_open(err.write_end);
  close_if_open(report.write_end);
  if (pid < 0) {
    close_if_open(out.read_end), close_if_open(err.read_end), close_if_open(report.read_end);
    throw SystemError("fork() for worker '" + spec.argv[0] + "'", fork_errno);
  }
  setpgid(pid, pid);  // also done by the child; whichever runs first wins the race with kill(-pid)

  int exec_errno = 0;
  ssize_t got;
  do {
    got = read(report.read_end, &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  close_if_open(report.read_end);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    waitpid(pid, nullptr, 0);
    close_if_open(out.read_end), close_if_open(err.read_end);
    std::string message = "cannot run worker command '" + spec.argv[0] + "': " + std::strerror(exec_errno);
    if (exec_errno == ENOENT || exec_errno == EACCES || exec_errno == ENOEXEC || exec_errno == ENOTDIR) {
      throw UsageError(message + ": check the program after `--` (it must be an executable file or on PATH)");
    }
    throw Error(message);
  }
  fcntl(out.read_end, F_SETFL, O_NONBLOCK);
  fcntl(err.read_end, F_SETFL, O_NONBLOCK);
  return WorkerProcess{pid, out.read_end, err.read_end};
}

void signal_process_group(pid_t pgid, int signal) {
  if (pgid > 0) kill(-pgid, signal);
}

bool peek_exit(pid_t pid, ExitStatus& status) {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno == ECHILD) {  // already reaped elsewhere: treat as lost
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
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace mgtrain
