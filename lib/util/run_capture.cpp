// fork/exec with two pipes drained by poll until exit or deadline (see run_capture.hpp).
#include "util/run_capture.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "util/environment.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"

namespace mgtrain {
namespace {

std::vector<std::string> child_environment(const CaptureOptions& options) {
  EnvMap env = current_environment();
  for (const auto& name : options.unset_env) env.erase(name);
  for (const auto& [name, value] : options.set_env) env[name] = value;
  return to_environ_strings(env);
}

struct Child {
  pid_t pid = -1;
  Fd out;  // the read ends of its stdout and stderr
  Fd err;
  bool group = false;  // leads its own process group: the timeout kills the group
};

// Forks and execs argv (PATH searched) with stdout and stderr to pipes and stdin from /dev/null. Throws
// SystemError when it cannot start (the child reports exec's or chdir's errno through a close-on-exec pipe).
Child start_child(const std::vector<std::string>& argv, const CaptureOptions& options) {
  Pipe out = make_pipe(), err = make_pipe(), exec_error = make_pipe();
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env_strings = child_environment(options);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) throw SystemError("fork", errno);
  if (pid == 0) {
    if (options.own_process_group) setpgid(0, 0);
    dup2(out.write.get(), STDOUT_FILENO);
    dup2(err.write.get(), STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    if (options.working_directory.empty() || chdir(options.working_directory.c_str()) == 0) {
      execvpe(args[0], args.data(), envp.data());
    }
    const int e = errno;
    (void)!write(exec_error.write.get(), &e, sizeof e);
    _exit(127);
  }
  if (options.own_process_group) setpgid(pid, pid);  // also here: no race with the timeout's kill(-pid)
  out.write.reset();
  err.write.reset();
  exec_error.write.reset();
  int child_errno = 0;
  if (read(exec_error.read.get(), &child_errno, sizeof child_errno) == sizeof child_errno) {
    waitpid(pid, nullptr, 0);
    throw SystemError("cannot start " + argv[0], child_errno);
  }
  return Child{pid, std::move(out.read), std::move(err.read), options.own_process_group};
}

// Reads the child's stdout and stderr into `result` until both close, or until the deadline, when the child is
// killed (SIGKILL) and result.timed_out set.
void drain_output(Child& child, double timeout_s, CapturedRun& result) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  Fd* pipes[2] = {&child.out, &child.err};
  pollfd fds[2] = {{child.out.get(), POLLIN, 0}, {child.err.get(), POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  char buffer[8192];
  while (open_count > 0) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      result.timed_out = true;
      kill(child.group ? -child.pid : child.pid, SIGKILL);
      break;
    }
    int ready = poll(fds, 2, static_cast<int>(left));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2 && ready > 0; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        pipes[i]->reset();
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
}

}  // namespace

CapturedRun run_and_capture(const std::vector<std::string>& argv, const CaptureOptions& options) {
  if (argv.empty()) throw Error("run_and_capture: empty command");
  Child child = start_child(argv, options);
  CapturedRun result;
  drain_output(child, options.timeout_s, result);
  child.out.reset();
  child.err.reset();
  int status = 0;
  while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(status) && !result.timed_out) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace mgtrain
