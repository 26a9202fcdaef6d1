// The supervisor's event loop and its side effects (spawning, signalling, reaping, logs).
#include "supervise/supervisor.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "util/error.hpp"
#include "output/file_tail.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"
#include "contract/log_layout.hpp"
#include "supervise/worker_process.hpp"

namespace mgtrain {
namespace {

std::string fmt_rank(int local_rank) { return "local rank " + std::to_string(local_rank); }

using Clock = std::chrono::steady_clock;

constexpr std::size_t kStderrTailLines = 20;
// After the last worker exited, how long its pipes may stay open (held by escaped descendants).
constexpr auto kDrainTimeout = std::chrono::seconds(2);

SupervisionPolicy::Settings policy_settings(const LaunchPlan& plan) {
  SupervisionPolicy::Settings settings;
  settings.coordinated = plan.multi_node();
  settings.nproc = plan.nproc;
  settings.max_restarts = plan.max_restarts;
  settings.grace_period_s = plan.grace_period_s;
  settings.heartbeat_timeout_s = plan.heartbeat_timeout_s;
  return settings;
}

Clock::duration heartbeat_probe_interval(double timeout_s) {
  double interval = std::min(1.0, std::max(0.01, timeout_s / 4));
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval));
}

void make_directories(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) {
    throw Error("cannot create log directory " + path + ": " + error.message() +
                ": choose a writable directory with --log-dir (launch.log_dir)");
  }
}

std::optional<std::string> environment_value(const EnvMap& environment, const char* name) {
  const auto found = environment.find(name);
  if (found == environment.end()) return std::nullopt;
  return found->second;
}

// Reads and drops what stdin has; true at its end (EOF, or an error other than "try again").
bool stdin_closed() {
  char buffer[4096];
  ssize_t got = read(STDIN_FILENO, buffer, sizeof buffer);
  return got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR);
}

}  // namespace

Supervisor::Supervisor(LaunchPlan plan, EnvMap parent_environment, std::string config_file,
                       PortProbe& ports, int first_port, int console_stdout_fd, int console_stderr_fd)
    : plan_(std::move(plan)),
      parent_environment_(std::move(parent_environment)),
      config_file_(std::move(config_file)),
      ports_(ports),
      first_port_(first_port),
      console_(console_stdout_fd, console_stderr_fd),
      line_prefix_(LinePrefix::from_environment(environment_value(parent_environment_, kLogLinePrefixTemplateVariable))),
      policy_(policy_settings(plan_), *this) {}

Supervisor::~Supervisor() {
  kill_and_reap_all();
  console_.flush();
}

void Supervisor::kill_and_reap_all() {
  for (Worker& worker : workers_) {
    if (!worker.alive) continue;
    signal_process_group(worker.pid, SIGKILL);
    reap(worker.pid);
    guard_.forget(worker.pid);
    worker.alive = false;
  }
}

void Supervisor::start_workers(int attempt) {
  if (attempt > 0 && !peer_) announce_restart(attempt);
  int port = peer_ ? plan_.master_port
                  : attempt == 0 ? first_port_ : (plan_.picks_port() ? ports_.pick_free_port() : plan_.master_port);
  workers_.clear();
  pids_by_attempt_.resize(static_cast<std::size_t>(attempt) + 1);
  pids_by_attempt_[attempt].assign(plan_.nproc, -1);
  try {
    for (int local_rank = 0; local_rank < plan_.nproc; ++local_rank) {
      int global_rank = plan_.global_rank(local_rank);
      std::string rank_directory = log_layout::rank_dir(plan_.run_dir, attempt, global_rank);
      make_directories(rank_directory);
      // Left by an earlier launch with this run id, they would be taken for this worker's.
      std::remove(log_layout::error_file(rank_directory).c_str());
      std::remove(log_layout::heartbeat_file(rank_directory).c_str());

      WorkerSlot slot{local_rank, attempt, port, config_file_};
      slot.stdout_to_console = plan_.console[local_rank].stdout_to_console;
      slot.console_columns = slot.stdout_to_console ? console_.stdout_terminal_columns() : 0;
      WorkerProcessSpec spec;
      spec.argv = expand_worker_command(worker_command(plan_, config_file_), local_rank);
      spec.environment = to_environ_strings(build_worker_environment(plan_, slot, parent_environment_));
      spec.signal_mask = signals_.original_mask();
      spec.announce_fd = guard_.announce_fd();  // the child registers its process group itself
      const ConsoleRouting& routing = plan_.console[local_rank];
      const StreamSet terminal = terminal_streams(plan_.tty, local_rank, routing, console_.is_terminal(false), console_.is_terminal(true));
      spec.stdout_terminal = terminal.out;
      spec.stderr_terminal = terminal.err;
      spec.terminal_size = console_.terminal_size();
      WorkerProcess process = start_worker_process(spec);

      Worker worker;
      worker.local_rank = local_rank;
      worker.pid = process.pid;
      worker.alive = true;
      if (plan_.heartbeat_timeout_s > 0) {
        worker.heartbeat = std::make_unique<HeartbeatFile>(log_layout::heartbeat_file(rank_directory));
      }
      workers_.push_back(std::move(worker));
      pids_by_attempt_[attempt][local_rank] = process.pid;

      const std::string prefix = line_prefix_.render(PrefixFields{"default", global_rank, local_rank, plan_.hostname});
      captures_.push_back(std::make_unique<StreamCapture>(std::move(process.stdout_pipe),
          StreamCaptureSettings{log_layout::stdout_log(rank_directory), false, routing.stdout_to_console, prefix, terminal.out}));
      captures_.push_back(std::make_unique<StreamCapture>(std::move(process.stderr_pipe),
          StreamCaptureSettings{log_layout::stderr_log(rank_directory), true, routing.stderr_to_console, prefix, terminal.err}));
    }
  } catch (...) {
    kill_and_reap_all();
    throw;
  }
  if (plan_.heartbeat_timeout_s > 0) next_heartbeat_probe_ = Clock::now();
  attempt_started_ = Clock::now();
}

void Supervisor::group_failing(const WorkerFailure& failure) {
  if (peer_) peer_->on_group_failing(failure);
}

void Supervisor::attempt_ended() {
  if (peer_) peer_->on_attempt_ended();
}

void Supervisor::begin_attempt(int attempt, LaunchPlan round_plan, std::string config_file) {
  plan_ = std::move(round_plan);
  config_file_ = std::move(config_file);
  policy_.begin_attempt(attempt, Clock::now());
}

void Supervisor::stop_workers_on_request() { policy_.stop_on_request(Clock::now()); }

void Supervisor::finish(int exit_code) { policy_.finish_coordinated(exit_code); }

void Supervisor::signal_running_workers(int signal) {
  for (const Worker& worker : workers_) {
    if (worker.alive) signal_process_group(worker.pid, signal);
  }
}

void Supervisor::handle_child_exits(Clock::time_point now) {
  std::vector<std::pair<int, ExitStatus>> exits;
  for (Worker& worker : workers_) {
    if (!worker.alive) continue;
    // While the worker is a zombie its process group id cannot be reused: its children are taken down first.
    const std::optional<ExitStatus> status = collect_exit(worker.pid, guard_);
    if (!status) continue;
    worker.alive = false;
    exits.emplace_back(worker.local_rank, *status);
  }
  // Only after the whole batch: the last exit may start the next attempt, replacing workers_.
  const int attempt = policy_.attempt();
  for (const auto& [local_rank, status] : exits) {
    policy_.on_worker_exit(local_rank, status, now, timer_kills_.count({attempt, local_rank}) != 0);
  }
}

void Supervisor::handle_signals(Clock::time_point now) {
  for (int signal : signals_.take_pending()) {
    if (signal == SIGCHLD) {
      handle_child_exits(now);
    } else if (policy_.finished() && peer_ && (signal == SIGINT || signal == SIGTERM || signal == SIGHUP || signal == SIGQUIT)) {
      peer_->on_signal_during_teardown(signal);  // e.g. a node agent's flush and the rendezvous' late-agent window
    } else {
      policy_.on_signal(signal, now);
    }
  }
}

void Supervisor::probe_heartbeats(Clock::time_point now) {
  if (!next_heartbeat_probe_ || now < *next_heartbeat_probe_) return;
  for (Worker& worker : workers_) {
    if (worker.alive && worker.heartbeat && worker.heartbeat->changed_since_last_check()) {
      policy_.on_heartbeat(worker.local_rank, now);
    }
  }
  next_heartbeat_probe_ = now + heartbeat_probe_interval(plan_.heartbeat_timeout_s);
}

SupervisionResult Supervisor::run() {
  started_steady_ = Clock::now();
  started_wall_ = std::chrono::system_clock::now();
  if (!plan_.timer_file.empty() && !file_timers_) file_timers_ = std::make_unique<FileTimerWatch>(plan_.timer_file);
  policy_.start(started_steady_);
  LoopState loop;
  loop.watch_stdin = plan_.exit_with_stdin;
  // One ppoll over the signalfd, every worker pipe, stdin (--hosts agents), the rendezvous peer and the
  // observer, until the policy has finished and the pipes are drained.
  while (!finished_and_drained(Clock::now(), loop)) {
    const PollLayout layout = fill_poll_fds(loop);
    const std::optional<Clock::time_point> wake = next_wake(loop);
    const Clock::time_point before = Clock::now();
    timespec timeout{};
    if (wake) timeout = to_timespec(*wake - before);
    const int ready = ppoll(loop.poll_fds.data(), loop.poll_fds.size(), wake ? &timeout : nullptr, nullptr);
    if (ready < 0 && errno != EINTR) throw SystemError("ppoll() in the supervisor", errno);
    dispatch(ready > 0, layout, loop, Clock::now());
  }
  console_.flush();
  return result();
}

bool Supervisor::finished_and_drained(Clock::time_point now, LoopState& loop) {
  if (!policy_.finished()) return false;
  bool any_open = false;
  for (const auto& capture : captures_) any_open = any_open || capture->open();
  if (any_open) {
    if (!loop.drain_deadline) loop.drain_deadline = now + kDrainTimeout;
    if (now >= *loop.drain_deadline) {  // a descendant still holds a pipe open: stop waiting for it
      for (auto& capture : captures_) capture->close_stream(console_);
      captures_.clear();
      any_open = false;
    }
  }
  return !any_open && (!peer_ || peer_->done(now));
}

std::optional<Supervisor::Clock::time_point> Supervisor::next_wake(const LoopState& loop) const {
  std::optional<Clock::time_point> wake = policy_.next_deadline();
  auto earliest = [&wake](const std::optional<Clock::time_point>& other) {
    if (other && (!wake || *other < *wake)) wake = other;
  };
  if (!policy_.finished()) earliest(next_heartbeat_probe_);
  if (file_timers_ && !policy_.finished()) earliest(file_timers_->next_deadline(Clock::now()));
  earliest(loop.drain_deadline);
  for (const auto& capture : captures_) earliest(capture->console_deadline());  // a partial line due on the console
  if (peer_) earliest(peer_->next_deadline());
  if (observer_ && !policy_.finished()) earliest(observer_->next_deadline());
  return wake;
}

Supervisor::PollLayout Supervisor::fill_poll_fds(LoopState& loop) const {
  PollLayout layout;
  loop.poll_fds.clear();
  loop.poll_fds.push_back(pollfd{signals_.fd(), POLLIN, 0});
  for (const auto& capture : captures_) loop.poll_fds.push_back(pollfd{capture->fd(), POLLIN, 0});
  layout.captures_end = loop.poll_fds.size();
  if (loop.watch_stdin) loop.poll_fds.push_back(pollfd{STDIN_FILENO, POLLIN, 0});
  if (file_timers_) {
    layout.timer_index = loop.poll_fds.size();
    loop.poll_fds.push_back(pollfd{file_timers_->fd(), POLLIN, 0});
  }
  layout.peer_first = loop.poll_fds.size();
  if (peer_) peer_->add_poll_fds(loop.poll_fds);
  layout.observer_first = loop.poll_fds.size();
  if (observer_) observer_->add_poll_fds(loop.poll_fds);
  return layout;
}

void Supervisor::dispatch(bool any_ready, const PollLayout& layout, LoopState& loop, Clock::time_point now) {
  std::vector<pollfd>& fds = loop.poll_fds;
  if (any_ready) {
    for (std::size_t index = 1; index < layout.captures_end; ++index) {
      if (fds[index].revents != 0) captures_[index - 1]->read_available(console_);
    }
    if (loop.watch_stdin && fds[layout.captures_end].revents != 0 && stdin_closed()) {
      // Started by `mgtrain launch --hosts`: the remote shell that carried this agent is gone.
      loop.watch_stdin = false;
      console_.message(log::Level::Info, "stdin closed (the launcher that started this agent is gone): stopping the job");
      policy_.on_signal(SIGHUP, now);
    }
    if (layout.timer_index != 0 && fds[layout.timer_index].revents != 0) read_file_timers();
    if (fds[0].revents != 0) handle_signals(now);
    // Signals may have started a new attempt: drop only captures that closed, never new ones.
    captures_.erase(std::remove_if(captures_.begin(), captures_.end(),
                                   [](const std::unique_ptr<StreamCapture>& capture) { return !capture->open(); }),
                    captures_.end());
  }
  if (peer_) {
    if (any_ready) peer_->on_poll(fds.data() + layout.peer_first, layout.observer_first - layout.peer_first, now);
    peer_->on_time(now);
  }
  if (observer_) {
    if (any_ready) observer_->on_poll(fds.data() + layout.observer_first, fds.size() - layout.observer_first);
    observer_->on_time(now);
  }
  for (auto& capture : captures_) capture->on_time(now, console_);
  probe_heartbeats(now);
  check_file_timers();
  policy_.on_time(now);
  console_.flush();
}

void Supervisor::read_file_timers() {
  for (const std::string& problem : file_timers_->on_readable()) {
    console_.message(log::Level::Warning, "file timer: {} (torch's FileTimerClient format expected); ignored", problem);
  }
}

// torch's FileTimerServer signals any pid; the launcher signals only its own workers and their descendants
// (a process in a worker's process group), so a stray request cannot kill an unrelated process.
void Supervisor::check_file_timers() {
  if (!file_timers_) return;
  for (const ExpiredFileTimer& timer : file_timers_->take_expired()) {
    const pid_t group = getpgid(static_cast<pid_t>(timer.pid));
    const Worker* owner = nullptr;
    for (const Worker& worker : workers_) {
      if (worker.alive && (worker.pid == timer.pid || worker.pid == group)) owner = &worker;
    }
    if (!owner && kill(static_cast<pid_t>(timer.pid), 0) != 0 && errno == ESRCH) continue;  // it has ended
    if (!owner) {
      console_.message(log::Level::Warning, "file timer \"{}\" of pid {} expired, but that pid is not one of this job's "
                       "running workers: not signalled", timer.scope_id, timer.pid);
      continue;
    }
    console_.message(log::Level::Warning, "{} (pid {}): file timer \"{}\" expired; sending it {}",
                     fmt_rank(owner->local_rank), timer.pid, timer.scope_id,
                     timer.signal == 0 ? std::string("signal 0 (nothing)") : signal_name(timer.signal));
    if (timer.signal != 0) kill(static_cast<pid_t>(timer.pid), timer.signal);
    timer_kills_[{policy_.attempt(), owner->local_rank}] = timer;
  }
}

SupervisionResult Supervisor::result() {
  SupervisionResult result;
  result.exit_code = policy_.exit_code();
  result.launcher_signal = policy_.launcher_signal();
  result.stopped_after_checkpoint = policy_.stopped_after_checkpoint();
  result.attempts = policy_.attempt() + 1;
  if (policy_.root_cause()) result.failure = build_failure_report();
  return result;
}

std::vector<Supervisor::WorkerView> Supervisor::worker_views() const {
  std::vector<WorkerView> views;
  for (const Worker& worker : workers_) {
    views.push_back(WorkerView{worker.local_rank, plan_.global_rank(worker.local_rank), worker.pid, worker.alive});
  }
  return views;
}

std::optional<FailureReport> Supervisor::local_failure_report() const {
  if (!policy_.root_cause()) return std::nullopt;
  return build_failure_report();
}

void Supervisor::announce_restart(int attempt) {
  std::string why;
  for (const WorkerFailure& failure : policy_.failures()) {
    if (failure.attempt != attempt - 1 || failure.during_teardown) continue;
    why = failure.hung ? fmt_rank(failure.local_rank) + " hung" : fmt_rank(failure.local_rank) + " " + failure.status.describe();
    break;
  }
  console_.message(log::Level::Info, "restarting all workers (attempt {} of {}){}; the failed attempt's logs are in {}",
                   attempt + 1, plan_.max_restarts + 1, why.empty() ? "" : " after " + why,
                   log_layout::attempt_dir(plan_.run_dir, attempt - 1));
}

FailedWorker Supervisor::describe_failure(const WorkerFailure& failure) const {
  FailedWorker worker;
  worker.local_rank = failure.local_rank;
  worker.global_rank = plan_.global_rank(failure.local_rank);
  worker.attempt = failure.attempt;
  worker.host = plan_.hostname;
  worker.pid = pids_by_attempt_.at(failure.attempt).at(failure.local_rank);
  worker.status = failure.status;
  worker.hung = failure.hung;
  worker.silent_s = failure.silent_s;
  worker.during_teardown = failure.during_teardown;
  if (failure.attempt == policy_.attempt()) {
    worker.after_start_s = std::chrono::duration<double>(failure.time - attempt_started_).count();
  }
  auto timer = timer_kills_.find({failure.attempt, failure.local_rank});
  if (timer != timer_kills_.end() && !failure.hung) {
    worker.expired_timer_scope = timer->second.scope_id;
    worker.expired_timer_pid = timer->second.pid;
  }
  auto wall = started_wall_ + std::chrono::duration_cast<std::chrono::system_clock::duration>(failure.time - started_steady_);
  worker.time_utc = format_utc_millis(
      std::chrono::duration_cast<std::chrono::milliseconds>(wall.time_since_epoch()).count());
  std::string rank_directory = log_layout::rank_dir(plan_.run_dir, failure.attempt, worker.global_rank);
  worker.stderr_log = log_layout::stderr_log(rank_directory);
  worker.stderr_tail = read_last_lines(worker.stderr_log, kStderrTailLines);
  if (!plan_.python.empty()) {  // a Python program that died at once because its interpreter has no torch
    std::string stderr_text;
    for (const std::string& line : worker.stderr_tail) stderr_text += line + "\n";
    worker.hint = missing_torch_hint(stderr_text, worker.after_start_s, plan_.python, plan_.python_source);
  }
  if (std::optional<std::string> error_text = read_small_file(log_layout::error_file(rank_directory))) {
    worker.error_file = parse_torch_error_file(*error_text);
  }
  return worker;
}

FailureReport Supervisor::build_failure_report() const {
  std::size_t cause = *policy_.root_cause();
  FailureReport report;
  report.run_id = plan_.run_id;
  report.run_dir = plan_.run_dir;
  report.exit_code = policy_.exit_code();
  report.attempt = policy_.attempt();
  report.max_restarts = plan_.max_restarts;
  const std::vector<WorkerFailure>& failures = policy_.failures();
  report.root_cause = describe_failure(failures[cause]);
  for (std::size_t index = 0; index < failures.size(); ++index) {
    if (index != cause && failures[index].attempt == policy_.attempt()) {
      report.other_failures.push_back(describe_failure(failures[index]));
    }
  }
  return report;
}

}  // namespace mgtrain
