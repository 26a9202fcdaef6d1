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

namespace mgtrain {
namespace {

std::vector<std::string> child_environment(const CaptureOptions& options) {
  EnvMap env = current_environment();
  for (const auto& name : options.unset_env) env.erase(name);
  for (const auto& [name, value] : options.set_env) env[name] = value;
  return to_environ_strings(env);
}

}  // namespace

CapturedRun run_and_capture(const std::vector<std::string>& argv, const CaptureOptions& options) {
  if (argv.empty()) throw Error("run_and_capture: empty command");
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw SystemError("pipe", errno);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) throw SystemError("pipe", errno);
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env_strings = child_environment(options);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int exec_error[2];
  if (pipe2(exec_error, O_CLOEXEC) != 0) throw SystemError("pipe", errno);

  pid_t pid = fork();
  if (pid < 0) throw SystemError("fork", errno);
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    if (!options.working_directory.empty() && chdir(options.working_directory.c_str()) != 0) {
      int e = errno;
      (void)!write(exec_error[1], &e, sizeof e);
      _exit(127);
    }
    execvpe(args[0], args.data(), envp.data());
    int e = errno;
    (void)!write(exec_error[1], &e, sizeof e);
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(exec_error[1]);
  int child_errno = 0;
  ssize_t got = read(exec_error[0], &child_errno, sizeof child_errno);
  close(exec_error[0]);
  if (got == sizeof child_errno) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    waitpid(pid, nullptr, 0);
    throw SystemError("cannot start " + argv[0], child_errno);
  }

  CapturedRun result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options.timeout_s);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  char buffer[8192];
  while (open_count > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      result.timed_out = true;
      kill(pid, SIGKILL);
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
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  for (auto& p : fds)
    if (p.fd >= 0) close(p.fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && !result.timed_out) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace mgtrain
