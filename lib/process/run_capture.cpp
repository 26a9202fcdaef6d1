// A helper program started by start_child (worker_process.hpp), its two pipes drained until exit or deadline.
#include "process/run_capture.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "process/worker_process.hpp"
#include "util/environment.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
namespace {

std::vector<std::string> child_environment(const CaptureOptions& options) {
  EnvMap env = current_environment();
  for (const auto& name : options.unset_env) env.erase(name);
  for (const auto& [name, value] : options.set_env) env[name] = value;
  return to_environ_strings(env);
}

// Reads the child's stdout and stderr into `result` until both close, or until the deadline, when the child is
// killed (SIGKILL) and result.timed_out set.
void drain_output(WorkerProcess& child, bool group, double timeout_s, CapturedRun& result) {
  const auto deadline = std::chrono::steady_clock::now() + steady_seconds(timeout_s);
  Fd* pipes[2] = {&child.stdout_pipe, &child.stderr_pipe};
  pollfd fds[2] = {{child.stdout_pipe.get(), POLLIN, 0}, {child.stderr_pipe.get(), POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  char buffer[8192];
  while (open_count > 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = true;
      kill(group ? -child.pid : child.pid, SIGKILL);
      break;
    }
    if (wait_ready(fds, 2, deadline, "for a helper program's output") == 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
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
  WorkerProcessSpec spec;
  spec.argv = argv;
  spec.environment = child_environment(options);
  spec.working_directory = options.working_directory;
  spec.own_process_group = options.own_process_group;
  spec.die_with_parent = false;
  WorkerProcess child = start_child(spec);
  CapturedRun result;
  drain_output(child, options.own_process_group, options.timeout_s, result);
  child.stdout_pipe.reset();
  child.stderr_pipe.reset();
  int status = 0;
  while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(status) && !result.timed_out) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace mgtrain
