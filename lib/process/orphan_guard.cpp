// The orphan guard process: a forked copy of the launcher reading process-group ids from a pipe.
#include "process/orphan_guard.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <csignal>

#include <set>

#include "util/error.hpp"

namespace mgtrain {
namespace {

[[noreturn]] void run_guard(int read_fd) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) {
    signal(sig, SIG_IGN);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Hold nothing of the launcher's open: no pipes, no terminal, no log files.
  if (read_fd != STDIN_FILENO) {
    dup2(read_fd, STDIN_FILENO);
  }
  // In the forked child before anything else: raw close() is async-signal-safe, no Fd owns these here.
  if (syscall(SYS_close_range, 1U, ~0U, 0U) != 0) {
    for (int fd = 1; fd < 1024; ++fd) close(fd);
  }
  std::set<int> groups;
  int message = 0;
  while (true) {
    ssize_t got = read(STDIN_FILENO, &message, sizeof message);
    if (got < 0 && errno == EINTR) continue;
    if (got != static_cast<ssize_t>(sizeof message)) break;  // EOF: the launcher is gone
    if (message > 0) groups.insert(message);
    if (message < 0) groups.erase(-message);
  }
  for (int group : groups) kill(-group, SIGKILL);
  _exit(0);
}

}  // namespace

OrphanGuard::OrphanGuard() {
  Pipe pipe = make_pipe();
  pid_t pid = fork();
  if (pid == 0) {
    // The child never returns (run_guard ends in _exit), so no destructor runs here: close by hand
    // (async-signal-safe).
    close(pipe.write.get());
    run_guard(pipe.read.get());
  }
  int fork_errno = errno;
  pipe.read.reset();
  if (pid < 0) throw SystemError("fork() for the orphan guard", fork_errno);
  guard_pid_ = pid;
  pipe_write_ = std::move(pipe.write);
}

OrphanGuard::~OrphanGuard() {
  pipe_write_.reset();
  if (guard_pid_ > 0) {
    while (waitpid(guard_pid_, nullptr, 0) < 0 && errno == EINTR) {}
  }
}

void OrphanGuard::send(int message) {
  ssize_t written;
  do {
    written = write(pipe_write_.get(), &message, sizeof message);
  } while (written < 0 && errno == EINTR);
}

void OrphanGuard::forget(pid_t process_group) { send(-static_cast<int>(process_group)); }

}  // namespace mgtrain
