// The supervisor on the event loop: starting workers, carrying out the policy's orders, file timers, the failure
// report (progress files and hang diagnostics: supervisor_hang.cpp).
#include "supervise/supervisor.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "contract/log_layout.hpp"
#include "diagnose/python_hook.hpp"
#include "output/duplicate_filter.hpp"
#include "output/file_tail.hpp"
#include "output/stream_capture.hpp"
#include "supervise/worker_process.hpp"
#include "util/error.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
namespace {

std::string fmt_rank(int local_rank) { return "local rank " + std::to_string(local_rank); }

using Clock = std::chrono::steady_clock;

constexpr std::size_t kStderrTailLines = 20;

SupervisionPolicy::Settings policy_settings(const LaunchPlan& plan) {
  SupervisionPolicy::Settings settings;
  settings.coordinated = plan.multi_node();
  settings.nproc = plan.nproc;
  settings.max_restarts = plan.max_restarts;
  settings.grace_period_s = plan.grace_period_s;
  settings.stop_notice_s = Supervisor::kStopNoticeS;
  settings.hang_timeout_s = plan.hang_timeout_s;
  settings.diagnose_timeout_s = plan.diagnose_timeout_s;
  settings.max_port_retries = plan.picks_port() && !plan.multi_node() ? Supervisor::kMaxPortRetries : 0;
  settings.personality = plan.personality;
  settings.handled_signals = plan.handled_signals;
  return settings;
}

// torchrun's filters for one stream, from the launcher's environment (a flag sets the variable: launch_command.cpp).
std::optional<std::vector<std::string>> duplicate_filters(const EnvMap& environment, const char* variable) {
  std::optional<std::string> text = environment_value(environment, variable);
  if (!text) return std::nullopt;
  return parse_duplicate_filters(*text);
}

void make_directories(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) {
    throw Error("cannot create log directory " + path + ": " + error.message() +
                ": choose a writable directory with --log-dir (launch.log_dir)");
  }
}

// One worker stream (stdout or stderr) in the loop: its log file and console lines (stream_capture.hpp).
class CapturedOutput final : public ChildOutput {
 public:
  CapturedOutput(Fd source, StreamCaptureSettings settings, ConsoleWriter& console)
      : capture_(std::move(source), std::move(settings)), console_(console) {}
  void add_fds(std::vector<pollfd>& fds) override {
    if (capture_.open()) fds.push_back(pollfd{capture_.fd(), POLLIN, 0});
  }
  void on_ready(const pollfd&, LoopTime) override { capture_.read_available(console_); }
  std::optional<LoopTime> next_deadline() const override { return capture_.console_deadline(); }  // a partial line due
  void on_time(LoopTime now) override { capture_.on_time(now, console_); }
  bool open() const override { return capture_.open(); }
  void close_now() override { capture_.close_stream(console_); }

 private:
  StreamCapture capture_;
  ConsoleWriter& console_;
};

// Reads and drops what stdin has; true at its end (EOF, or an error other than "try again").
bool stdin_closed() {
  char buffer[4096];
  ssize_t got = read(STDIN_FILENO, buffer, sizeof buffer);
  return got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR);
}

}  // namespace

Supervisor::Supervisor(LaunchPlan plan, EnvMap parent_environment, std::string config_file, PortProbe& ports,
                       int first_port, int console_stdout_fd, int console_stderr_fd)
    : plan_(std::move(plan)),
      parent_environment_(std::move(parent_environment)),
      config_file_(std::move(config_file)),
      ports_(ports),
      first_port_(first_port),
      console_(console_stdout_fd, console_stderr_fd),
      line_prefix_(
          LinePrefix::from_environment(environment_value(parent_environment_, kLogLinePrefixTemplateVariable))),
      duplicate_filters_{duplicate_filters(parent_environment_, kDuplicateStdoutFiltersVariable),
                         duplicate_filters(parent_environment_, kDuplicateStderrFiltersVariable)},
      policy_(policy_settings(plan_), *this),
      loop_(*this) {}

Supervisor::~Supervisor() {
  loop_.kill_children();
  console_.flush();
}

void Supervisor::start_workers(int attempt) {
  const int port = coordinator_   ? plan_.master_port
                   : attempt == 0 ? first_port_
                                  : (plan_.picks_port() ? ports_.pick_free_port() : plan_.master_port);
  if (!coordinator_) {
    if (attempt > 0 && policy_.port_retries() > port_retries_announced_) {
      port_retries_announced_ = policy_.port_retries();
      announce_port_retry(attempt, port);
    } else if (attempt > 0) {
      announce_restart(attempt);
    }
    plan_.restart_count = policy_.restarts();  // TORCHELASTIC_RESTART_COUNT: port retries do not count
  }
  port_by_attempt_.resize(static_cast<std::size_t>(attempt) + 1);
  port_by_attempt_[attempt] = port;
  workers_.clear();
  pids_by_attempt_.resize(static_cast<std::size_t>(attempt) + 1);
  pids_by_attempt_[attempt].assign(plan_.nproc, -1);
  try {
    // torchrun's filtered files: one per stream and attempt, shared by the node's ranks.
    std::shared_ptr<FilteredLog> filtered[2];
    for (int stream = 0; stream < 2; ++stream) {
      if (!duplicate_filters_[stream]) continue;
      const std::string attempt_directory = log_layout::attempt_dir(plan_.run_dir, attempt);
      make_directories(attempt_directory);
      filtered[stream] = std::make_shared<FilteredLog>(log_layout::filtered_log(attempt_directory, stream == 1),
                                                       *duplicate_filters_[stream]);
    }
    const bool torchrun_console = plan_.personality == Personality::Torchrun;
    // Progress files come with stack dumps: the Python hook the workers' PYTHONPATH names (worker_env.cpp).
    if (workers_get_progress_file(plan_)) diagnose::write_python_hook(log_layout::python_hook_dir(plan_.run_dir));
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
      const ConsoleRouting& routing = plan_.console[local_rank];
      StreamSet terminal =
          terminal_streams(plan_.tty, local_rank, routing, console_.is_terminal(false), console_.is_terminal(true));
      if (torchrun_console && plan_.tty.mode == TtyMode::Auto) {  // torchrun tees through a file: no terminal
        terminal.out = terminal.out && !routing.stdout_teed;
        terminal.err = terminal.err && !routing.stderr_teed;
      }
      spec.stdout_terminal = terminal.out;
      spec.stderr_terminal = terminal.err;
      spec.terminal_size = console_.terminal_size();
      WorkerProcess process = loop_.start_child(std::move(spec));

      Worker worker;
      worker.local_rank = local_rank;
      worker.pid = process.pid;
      worker.alive = true;
      if (plan_.hang_timeout_s > 0) {
        worker.heartbeat = std::make_unique<HeartbeatFile>(log_layout::heartbeat_file(rank_directory));
      }
      workers_.push_back(std::move(worker));
      pids_by_attempt_[attempt][local_rank] = process.pid;

      // The console: mgtrain's prefixes every line; torchrun's only teed streams (line_prefix.hpp). The filtered
      // files copy the lines the console shows behind a prefix, as torch tails only teed streams into them.
      const PrefixFields fields{plan_.role, global_rank, local_rank, plan_.hostname};
      const bool to_console[2] = {routing.stdout_to_console, routing.stderr_to_console};
      const bool teed[2] = {routing.stdout_teed, routing.stderr_teed};
      const bool terminal_stream[2] = {terminal.out, terminal.err};
      Fd* pipes[2] = {&process.stdout_pipe, &process.stderr_pipe};
      for (int stream = 0; stream < 2; ++stream) {
        StreamCaptureSettings settings;
        settings.log_path =
            stream == 0 ? log_layout::stdout_log(rank_directory) : log_layout::stderr_log(rank_directory);
        settings.is_stderr = stream == 1;
        settings.to_console = to_console[stream];
        settings.prefix = console_prefix(line_prefix_, torchrun_console, teed[stream], fields);
        settings.terminal = terminal_stream[stream];
        settings.universal_newlines = torchrun_console && teed[stream];
        if (to_console[stream] && (!torchrun_console || teed[stream])) settings.duplicate = filtered[stream];
        loop_.add_output(std::make_unique<CapturedOutput>(std::move(*pipes[stream]), std::move(settings), console_));
      }
    }
  } catch (...) {
    loop_.kill_children();
    throw;
  }
  if (plan_.hang_timeout_s > 0) next_heartbeat_probe_ = Clock::now();
  attempt_started_ = Clock::now();
}

void Supervisor::group_failing(const WorkerFailure& failure) {
  if (coordinator_) coordinator_->on_group_failing(failure);
}

void Supervisor::attempt_ended() {
  if (coordinator_) coordinator_->on_attempt_ended();
}

// Only the policy's question for a port the launcher picked (settings.max_port_retries): rank 0 (the store's host)
// failed soon after its start and the last lines of its stderr say the address was in use.
bool Supervisor::store_port_taken(const WorkerFailure& root) {
  if (coordinator_ || !plan_.picks_port() || root.hung || plan_.global_rank(root.local_rank) != 0) return false;
  if (root.attempt != policy_.attempt() || root.time - attempt_started_ > steady_seconds(kStoreStartWindowS)) {
    return false;
  }
  const std::string rank_directory = log_layout::rank_dir(plan_.run_dir, root.attempt, 0);
  return says_address_in_use(read_last_lines(log_layout::stderr_log(rank_directory), kStderrTailLines));
}

void Supervisor::begin_attempt(int attempt, LaunchPlan round_plan, std::string config_file) {
  plan_ = std::move(round_plan);
  config_file_ = std::move(config_file);
  policy_.begin_attempt(attempt, Clock::now());
}

void Supervisor::stop_workers_on_request() { policy_.stop_on_request(Clock::now()); }

void Supervisor::finish(int exit_code) { policy_.finish_coordinated(exit_code); }

// The loop's running children are the current attempt's running workers: an attempt starts only after the last one
// ended.
void Supervisor::signal_running_workers(int signal) { loop_.signal_children(signal); }

void Supervisor::waiting_for_exit(const std::vector<int>& local_ranks, int signal, Clock::time_point kill_at) {
  std::vector<int> ranks;
  std::vector<pid_t> pids;
  for (const Worker& worker : workers_) {
    if (!worker.alive || std::find(local_ranks.begin(), local_ranks.end(), worker.local_rank) == local_ranks.end()) {
      continue;
    }
    ranks.push_back(plan_.global_rank(worker.local_rank));
    pids.push_back(worker.pid);
  }
  if (ranks.empty()) return;
  const double left_s = std::max(0.0, std::chrono::duration<double>(kill_at - Clock::now()).count());
  console_.message(log::Level::Info, "waiting for {} (pid{} {}) to exit after {}: SIGKILL in {} (--grace-period {})",
                   rank_list(ranks), ranks.size() == 1 ? "" : "s", fmt::join(pids, ", "), signal_name(signal),
                   format_seconds(left_s), format_seconds(plan_.grace_period_s));
}

void Supervisor::not_restarted(const WorkerFailure& root) {
  const int left = plan_.max_restarts - policy_.restarts();
  console_.message(log::Level::Info,
                   "rank {} {}, which means bad input (config, arguments, data, a missing file: docs/exit-codes.md): "
                   "not restarted, since a restart would fail the same way ({} restart{} of --max-restarts {} left "
                   "unused); fix the input and launch again",
                   plan_.global_rank(root.local_rank), root.status.describe(), left, left == 1 ? "" : "s",
                   plan_.max_restarts);
}

void Supervisor::on_child_exits(const std::vector<ChildExit>& exits, Clock::time_point now) {
  std::vector<std::pair<int, ExitStatus>> ended;
  for (const ChildExit& exit : exits) {
    for (Worker& worker : workers_) {
      if (!worker.alive || worker.pid != exit.pid) continue;
      worker.alive = false;
      ended.emplace_back(worker.local_rank, exit.status);
    }
  }
  // Only after the whole batch: the last exit may start the next attempt, replacing workers_.
  const int attempt = policy_.attempt();
  for (const auto& [local_rank, status] : ended) {
    const auto timer = timer_kills_.find({attempt, local_rank});
    policy_.on_worker_exit(local_rank, status, now, timer == timer_kills_.end() ? 0 : timer->second.signal);
  }
}

void Supervisor::on_signal(int signal, Clock::time_point now) {
  if (policy_.finished() && coordinator_ && stops_the_job(signal)) {
    coordinator_->on_signal_during_teardown(signal);  // e.g. a node agent's flush and the rendezvous' late-agent window
  } else {
    policy_.on_signal(signal, now);
  }
}

SupervisionResult Supervisor::run() {
  started_steady_ = Clock::now();
  started_wall_ = std::chrono::system_clock::now();
  if (!plan_.timer_file.empty() && !file_timers_) file_timers_ = std::make_unique<FileTimerWatch>(plan_.timer_file);
  watch_stdin_ = plan_.exit_with_stdin;
  // Last of the participants: its on_time flushes the console after everyone else's.
  loop_.add(*this);
  policy_.start(started_steady_);
  while (!finished_and_drained(Clock::now())) loop_.wait_once();
  loop_.remove(*this);
  file_timers_.reset();  // its pipe is removed now: the launcher may die by a signal next (torchrun personality)
  console_.flush();
  return result();
}

bool Supervisor::finished_and_drained(Clock::time_point now) {
  return policy_.finished() && loop_.outputs_drained(now) && (!coordinator_ || coordinator_->done(now));
}

void Supervisor::add_fds(std::vector<pollfd>& fds) {
  if (watch_stdin_) fds.push_back(pollfd{STDIN_FILENO, POLLIN, 0});
  if (file_timers_) fds.push_back(pollfd{file_timers_->fd(), POLLIN, 0});
}

void Supervisor::on_ready(const pollfd& ready, Clock::time_point now) {
  if (file_timers_ && ready.fd == file_timers_->fd()) return read_file_timers();
  if (watch_stdin_ && ready.fd == STDIN_FILENO && stdin_closed()) {
    // Started by `mgtrain launch --hosts`: the remote shell that carried this agent is gone.
    watch_stdin_ = false;
    console_.message(log::Level::Info, "stdin closed (the launcher that started this agent is gone): stopping the job");
    policy_.on_signal(SIGHUP, now);
  }
}

std::optional<Supervisor::Clock::time_point> Supervisor::next_deadline() const {
  std::optional<Clock::time_point> wake = policy_.next_deadline();
  if (!policy_.finished()) keep_earliest(wake, next_heartbeat_probe_);
  if (policy_.diagnosing()) keep_earliest(wake, Clock::now() + steady_seconds(HangDiagnostics::kPollS));
  if (file_timers_ && !policy_.finished()) keep_earliest(wake, file_timers_->next_deadline(Clock::now()));
  return wake;
}

void Supervisor::on_time(Clock::time_point now) {
  const std::optional<Clock::time_point> policy_due = policy_.next_deadline();
  probe_heartbeats(now, policy_due && *policy_due <= now);  // a hang is judged on fresh reports only
  check_file_timers();
  policy_.on_time(now);
  poll_diagnostics(now);
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
  int fired = 0;  // the last signal sent, once every expired timer's is: as torch's server then signals itself
  for (const ExpiredFileTimer& timer : file_timers_->take_expired()) {
    const pid_t group = getpgid(static_cast<pid_t>(timer.pid));
    const Worker* owner = nullptr;
    for (const Worker& worker : workers_) {
      if (worker.alive && (worker.pid == timer.pid || worker.pid == group)) owner = &worker;
    }
    if (!owner && kill(static_cast<pid_t>(timer.pid), 0) != 0 && errno == ESRCH) continue;  // it has ended
    if (!owner) {
      console_.message(log::Level::Warning,
                       "file timer \"{}\" of pid {} expired, but that pid is not one of this job's "
                       "running workers: not signalled",
                       timer.scope_id, timer.pid);
      continue;
    }
    console_.message(log::Level::Warning, "{} (pid {}): file timer \"{}\" expired; sending it {}",
                     fmt_rank(owner->local_rank), timer.pid, timer.scope_id,
                     timer.signal == 0 ? std::string("signal 0 (nothing)") : signal_name(timer.signal));
    if (timer.signal != 0) kill(static_cast<pid_t>(timer.pid), timer.signal);
    timer_kills_[{policy_.attempt(), owner->local_rank}] = timer;
    if (timer.signal != 0) fired = timer.signal;
  }
  if (fired != 0) policy_.on_file_timer_fired(fired, Clock::now());
}

SupervisionResult Supervisor::result() {
  SupervisionResult result;
  result.exit_code = policy_.exit_code();
  result.launcher_signal = policy_.launcher_signal();
  result.stopped_by_file_timer = policy_.stopped_by_file_timer();
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
    why = failure.hung ? "rank " + std::to_string(plan_.global_rank(failure.local_rank)) + " hung"
                       : fmt_rank(failure.local_rank) + " " + failure.status.describe();
    break;
  }
  console_.message(log::Level::Info, "restarting all workers (attempt {} of {}){}; the failed attempt's logs are in {}",
                   policy_.restarts() + 1, plan_.max_restarts + 1, why.empty() ? "" : " after " + why,
                   log_layout::attempt_dir(plan_.run_dir, attempt - 1));
}

// Rank 0 of a single node said "address already in use": most likely about its store's port ("" when unlikely).
std::string Supervisor::store_port_hint(int attempt) const {
  const std::string port = std::to_string(port_by_attempt_.at(attempt));
  if (!plan_.picks_port()) {
    return "port " + port +
           " (launch.master_port: given, not picked by mgtrain) was probably in use when rank 0 started the " +
           "workers' store: free it, choose another with --master-port, or --master-port 0 to let mgtrain pick one " +
           "(and pick again when another program takes it)";
  }
  if (policy_.port_retries() < kMaxPortRetries) return "";  // not the store's start, as far as the supervisor saw
  return "the ports mgtrain picked were taken " + std::to_string(kMaxPortRetries + 1) +
         " times before rank 0 started the workers' store (last: port " + port +
         "): another program on this machine takes ports quickly; give a port reserved for this job with "
         "--master-port";
}

void Supervisor::announce_port_retry(int attempt, int port) {
  console_.message(log::Level::Warning,
                   "rank 0 could not start the workers' store: port {} was already in use (taken by another program "
                   "after the launcher picked it); starting the workers again on port {} (port retry {} of {}, not "
                   "counted as a restart); the failed try's logs are in {}",
                   port_by_attempt_.at(attempt - 1), port, policy_.port_retries(), kMaxPortRetries,
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
  worker.waiting = failure.waiting;
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
  worker.time_utc = format_utc_millis(unix_millis_at(failure.time));
  std::string rank_directory = log_layout::rank_dir(plan_.run_dir, failure.attempt, worker.global_rank);
  if (failure.hung || failure.waiting) describe_hang_facts(failure, rank_directory, worker);
  worker.stderr_log = log_layout::stderr_log(rank_directory);
  worker.stderr_tail = read_last_lines(worker.stderr_log, kStderrTailLines);
  if (!plan_.python.empty()) {  // a Python program that died at once because its interpreter has no torch
    std::string stderr_text;
    for (const std::string& line : worker.stderr_tail) stderr_text += line + "\n";
    worker.hint = missing_torch_hint(stderr_text, worker.after_start_s, plan_.python, plan_.python_source);
  }
  if (worker.hint.empty() && !coordinator_ && worker.global_rank == 0 && says_address_in_use(worker.stderr_tail)) {
    worker.hint = store_port_hint(failure.attempt);
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
  report.port_retries = coordinator_ ? 0 : policy_.port_retries();
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
