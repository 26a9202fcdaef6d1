// The supervisor: the loop's owner, handing exits, signals and deadlines to the policy (see supervisor.hpp).
#include "supervise/supervisor.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace mgtrain {
namespace {

SupervisionPolicy::Settings policy_settings(const LaunchPlan& plan) {
  SupervisionPolicy::Settings settings;
  settings.coordinated = plan.multi_node();
  settings.nproc = plan.nproc;
  settings.max_restarts = plan.max_restarts;
  settings.grace_period_s = plan.grace_period_s;
  settings.stop_notice_s = Supervisor::kStopNoticeS;
  settings.hang_timeout_s = plan.hang_timeout_s;
  settings.diagnose_timeout_s = plan.diagnose_timeout_s;
  settings.max_port_retries = plan.picks_port() && !plan.multi_node() ? StorePorts::kMaxPortRetries : 0;
  settings.personality = plan.personality;
  settings.handled_signals = plan.handled_signals;
  return settings;
}

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
      console_(console_stdout_fd, console_stderr_fd),
      policy_(policy_settings(plan_), group_),
      loop_(*this),
      ports_(plan_, ports, first_port, policy_, console_),
      hang_(plan_, workers_, policy_, console_, started_, coordinator_),
      file_timers_(plan_.timer_file.empty()
                       ? nullptr
                       : std::make_unique<FileTimerWatchdog>(plan_.timer_file, workers_, policy_, console_)),
      group_(plan_, config_file_, parent_environment_, console_, loop_, workers_, policy_, ports_, hang_, coordinator_),
      reporter_(plan_, workers_, policy_, group_, ports_, hang_, file_timers_, started_, coordinator_) {}

Supervisor::~Supervisor() {
  loop_.kill_children();
  console_.flush();
}

void Supervisor::begin_attempt(int attempt, LaunchPlan round_plan, std::string config_file) {
  plan_ = std::move(round_plan);
  config_file_ = std::move(config_file);
  policy_.begin_attempt(attempt, Clock::now());
}

void Supervisor::stop_workers_on_request() { policy_.stop_on_request(Clock::now()); }

void Supervisor::finish(int exit_code) { policy_.finish_coordinated(exit_code); }

void Supervisor::on_child_exits(const std::vector<ChildExit>& exits, Clock::time_point now) {
  std::vector<std::pair<int, ExitStatus>> ended;
  for (const ChildExit& exit : exits) {
    if (std::optional<int> local_rank = workers_.mark_exited(exit.pid)) ended.emplace_back(*local_rank, exit.status);
  }
  // Only after the whole batch: the last exit may start the next attempt, replacing workers_.
  const int attempt = policy_.record().attempt();
  for (const auto& [local_rank, status] : ended) {
    const ExpiredFileTimer* timer = file_timers_ ? file_timers_->fired_at(attempt, local_rank) : nullptr;
    policy_.on_worker_exit(local_rank, status, now, timer ? timer->signal : 0);
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
  started_ = ClockAnchor{};
  watch_stdin_ = plan_.exit_with_stdin;
  if (file_timers_) loop_.add(*file_timers_);
  // Last of the participants: its on_time flushes the console after everyone else's.
  loop_.add(*this);
  policy_.start(started_.steady);
  while (!finished_and_drained(Clock::now())) loop_.wait_once();
  loop_.remove(*this);
  if (file_timers_) {
    loop_.remove(*file_timers_);
    file_timers_->close_pipe();  // removed now: the launcher may die by a signal next (torchrun personality)
  }
  console_.release_held();
  console_.flush();
  return result();
}

bool Supervisor::finished_and_drained(Clock::time_point now) {
  return policy_.finished() && loop_.outputs_drained(now) && (!coordinator_ || coordinator_->done(now));
}

void Supervisor::add_fds(std::vector<pollfd>& fds) {
  if (watch_stdin_) fds.push_back(pollfd{STDIN_FILENO, POLLIN, 0});
}

void Supervisor::on_ready(const pollfd& ready, Clock::time_point now) {
  if (watch_stdin_ && ready.fd == STDIN_FILENO && stdin_closed()) {
    // Started by `mgtrain launch --hosts`: the remote shell that carried this agent is gone.
    watch_stdin_ = false;
    console_.message(log::Level::Info, "stdin closed (the launcher that started this agent is gone): stopping the job");
    policy_.on_signal(SIGHUP, now);
  }
}

std::optional<Supervisor::Clock::time_point> Supervisor::next_deadline() const {
  std::optional<Clock::time_point> wake = policy_.next_deadline();
  keep_earliest(wake, hang_.next_deadline());
  keep_earliest(wake, console_.held_deadline());  // deduplicated lines whose window ends
  return wake;
}

void Supervisor::on_time(Clock::time_point now) {
  const std::optional<Clock::time_point> policy_due = policy_.next_deadline();
  hang_.probe_progress(now, policy_due && *policy_due <= now);  // a hang is judged on fresh reports only
  policy_.on_time(now);
  hang_.poll_diagnostics(now);
  console_.release_due(now);
  console_.flush();
}

SupervisionResult Supervisor::result() const {
  SupervisionResult result;
  result.exit_code = policy_.record().exit_code();
  result.launcher_signal = policy_.record().launcher_signal();
  result.stopped_by_file_timer = policy_.record().stopped_by_file_timer();
  result.stopped_after_checkpoint = policy_.record().stopped_after_checkpoint();
  result.attempts = policy_.record().attempt() + 1;
  result.failure = reporter_.report();
  return result;
}

std::vector<Supervisor::WorkerView> Supervisor::worker_views() const {
  std::vector<WorkerView> views;
  for (const RosterWorker& worker : workers_.current()) {
    views.push_back(WorkerView{worker.local_rank, plan_.global_rank(worker.local_rank), worker.pid, worker.alive});
  }
  return views;
}

}  // namespace mgtrain
