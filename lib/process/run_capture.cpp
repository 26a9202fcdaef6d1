// A helper program started by start_child (worker_process.hpp), its two pipes drained until exit or deadline.
#include "process/run_capture.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "util/environment.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/fd.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
namespace {

// How often a helper whose pipes closed is looked at until it has exited (it usually has already).
constexpr auto kReapInterval = std::chrono::milliseconds(5);

std::vector<std::string> child_environment(const CaptureOptions& options) {
  EnvMap env = current_environment();
  for (const auto& name : options.unset_env) env.erase(name);
  for (const auto& [name, value] : options.set_env) env[name] = value;
  return to_environ_strings(env);
}

WorkerProcessSpec helper_spec(const std::vector<std::string>& argv, const CaptureOptions& options) {
  if (argv.empty()) throw Error("run_and_capture: empty command");
  WorkerProcessSpec spec;
  spec.argv = argv;
  spec.environment = child_environment(options);
  spec.working_directory = options.working_directory;
  spec.grouping = options.own_process_group ? ProcessGrouping::kOwnGroup : ProcessGrouping::kParent;
  // A helper a test runs from a thread of its own must survive the end of that thread (worker_process.hpp).
  spec.die_with_parent = false;
  return spec;
}

}  // namespace

HelperRun::HelperRun(const std::vector<std::string>& argv, const CaptureOptions& options)
    : child_(start_child(helper_spec(argv, options))),
      own_group_(options.own_process_group),
      deadline_(LoopClock::now() + steady_seconds(options.timeout_s)) {}

HelperRun::~HelperRun() {
  if (reaped_) return;
  kill_child();
  reap(true);
}

void HelperRun::add_fds(std::vector<pollfd>& fds) {
  for (const Fd* pipe : {&child_.stdout_pipe, &child_.stderr_pipe}) {
    if (*pipe) fds.push_back(pollfd{pipe->get(), POLLIN, 0});
  }
}

void HelperRun::on_ready(const pollfd& ready, LoopTime now) {
  const bool out = ready.fd == child_.stdout_pipe.get();
  if (ready.fd < 0 || (!out && ready.fd != child_.stderr_pipe.get())) return;  // another participant's
  Fd& pipe = out ? child_.stdout_pipe : child_.stderr_pipe;
  std::string& sink = out ? result_.out : result_.err;
  char buffer[8192];
  const ssize_t n = read(ready.fd, buffer, sizeof buffer);
  if (n > 0) {
    sink.append(buffer, static_cast<std::size_t>(n));
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    pipe.reset();
    if (!child_.stdout_pipe && !child_.stderr_pipe) next_reap_ = now;
  }
}

std::optional<LoopTime> HelperRun::next_deadline() const {
  if (reaped_) return std::nullopt;
  return next_reap_ ? std::min(*next_reap_, deadline_) : deadline_;
}

void HelperRun::on_time(LoopTime now) {
  if (reaped_) return;
  if (now >= deadline_ && !result_.timed_out) {
    result_.timed_out = true;
    kill_child();
    child_.stdout_pipe.reset();
    child_.stderr_pipe.reset();
    reap(true);  // SIGKILL: it is gone at once
    return;
  }
  if (next_reap_ && now >= *next_reap_) {
    reap(false);
    if (!reaped_) next_reap_ = now + kReapInterval;
  }
}

void HelperRun::kill_child() { kill(own_group_ ? -child_.pid : child_.pid, SIGKILL); }

void HelperRun::reap(bool block) {
  int wait_status = 0;
  pid_t got;
  do {
    got = waitpid(child_.pid, &wait_status, block ? 0 : WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got == 0) return;  // still running
  reaped_ = true;
  if (got < 0) return;  // not ours to reap (cannot happen): nothing more to learn
  const ExitStatus status = ExitStatus::from_wait_status(wait_status);
  if (status.signaled) {
    result_.signal = status.value;
  } else if (!result_.timed_out) {
    result_.exit_code = status.value;
  }
}

CapturedRun run_and_capture(const std::vector<std::string>& argv, const CaptureOptions& options) {
  HelperRun run(argv, options);
  std::vector<pollfd> fds;
  while (!run.done()) {
    fds.clear();
    run.add_fds(fds);
    wait_ready(fds.data(), fds.size(), run.next_deadline(), "for a helper program's output");
    const LoopTime now = LoopClock::now();
    for (const pollfd& fd : fds) {
      if (fd.revents != 0) run.on_ready(fd, now);
    }
    run.on_time(now);
  }
  return run.result();
}

}  // namespace mgtrain
