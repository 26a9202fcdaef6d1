// The node's worker group as the policy sees it (see worker_group.hpp).
#include "supervise/worker_group.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "contract/log_layout.hpp"
#include "diagnose/python_hook.hpp"
#include "output/duplicate_filter.hpp"
#include "output/stream_capture.hpp"
#include "process/worker_process.hpp"
#include "supervise/supervisor.hpp"
#include "supervise/worker_env.hpp"
#include "util/error.hpp"
#include "util/time_format.hpp"

namespace mgtrain {
namespace {

std::string fmt_rank(int local_rank) { return "local rank " + std::to_string(local_rank); }

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

}  // namespace

WorkerGroup::WorkerGroup(LaunchPlan& plan, const std::string& config_file, const EnvMap& parent_environment,
                         ConsoleWriter& console, EventLoop& loop, WorkerRoster& workers,
                         const SupervisionPolicy& policy, StorePorts& ports, HangResponse& hang,
                         AttemptCoordinator* const& coordinator)
    : plan_(plan),
      config_file_(config_file),
      parent_environment_(parent_environment),
      console_(console),
      loop_(loop),
      workers_(workers),
      policy_(policy),
      ports_(ports),
      hang_(hang),
      coordinator_(coordinator) {}

void WorkerGroup::start_workers(int attempt) {
  const StorePorts::AttemptPort port = ports_.begin_attempt(attempt, coordinator_ != nullptr);
  if (!coordinator_) {
    if (attempt > 0 && !port.retry) announce_restart(attempt);
    plan_.restart_count = policy_.record().restarts();  // TORCHELASTIC_RESTART_COUNT: port retries do not count
  }
  workers_.begin_attempt(attempt, plan_.nproc);
  console_.set_dedup(plan_.console_dedup ? std::optional<int>(ranks_on_console(plan_.console)) : std::nullopt);
  try {
    // torchrun's filtered files: one per stream and attempt, shared by the node's ranks.
    std::shared_ptr<FilteredLog> filtered[2];
    for (int stream = 0; stream < 2; ++stream) {
      if (!plan_.duplicate_filters[stream]) continue;
      const std::string attempt_directory = log_layout::attempt_dir(plan_.run_dir, attempt);
      make_directories(attempt_directory);
      filtered[stream] = std::make_shared<FilteredLog>(log_layout::filtered_log(attempt_directory, stream == 1),
                                                       *plan_.duplicate_filters[stream]);
    }
    // Progress files come with stack dumps: the Python hook the workers' PYTHONPATH names (worker_env.cpp).
    if (workers_get_progress_file(plan_)) diagnose::write_python_hook(log_layout::python_hook_dir(plan_.run_dir));
    for (int local_rank = 0; local_rank < plan_.nproc; ++local_rank)
      start_worker(attempt, local_rank, port.port, filtered);
  } catch (...) {
    loop_.kill_children();
    throw;
  }
  attempt_started_ = Clock::now();
  hang_.attempt_started(attempt_started_);
}

void WorkerGroup::start_worker(int attempt, int local_rank, int port,
                               const std::shared_ptr<FilteredLog> (&filtered)[2]) {
  const bool torchrun_console = plan_.personality == Personality::Torchrun;
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
  try {
    slot.snapshot_fd = snapshots_.fd_for(local_rank);
    spec.pass_fds.push_back(slot.snapshot_fd);
    for (const auto& [rank, fd] : local_rank == 0 ? snapshots_.replica_fds() : std::vector<std::pair<int, int>>()) {
      slot.snapshot_replicas += (slot.snapshot_replicas.empty() ? "" : ",") + fmt::format("{}:{}", rank, fd);
      spec.pass_fds.push_back(fd);
    }
  } catch (const SystemError& e) {
    console_.message(log::Level::Warning, "local rank {} runs without snapshots in memory: {}", local_rank, e.what());
  }
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

  RosterWorker worker;
  worker.local_rank = local_rank;
  worker.pid = process.pid;
  worker.alive = true;
  if (plan_.hang_timeout_s > 0) {
    worker.heartbeat = std::make_unique<HeartbeatFile>(log_layout::heartbeat_file(rank_directory));
  }
  workers_.add(attempt, std::move(worker));

  // The console: mgtrain's prefixes every line; torchrun's only teed streams (line_prefix.hpp). The filtered
  // files copy the lines the console shows behind a prefix, as torch tails only teed streams into them.
  const PrefixFields fields{plan_.role, global_rank, local_rank, plan_.hostname};
  const bool to_console[2] = {routing.stdout_to_console, routing.stderr_to_console};
  const bool teed[2] = {routing.stdout_teed, routing.stderr_teed};
  const bool terminal_stream[2] = {terminal.out, terminal.err};
  Fd* pipes[2] = {&process.stdout_pipe, &process.stderr_pipe};
  for (int stream = 0; stream < 2; ++stream) {
    StreamCaptureSettings settings;
    settings.log_path = stream == 0 ? log_layout::stdout_log(rank_directory) : log_layout::stderr_log(rank_directory);
    settings.is_stderr = stream == 1;
    settings.to_console = to_console[stream];
    settings.prefix = console_prefix(plan_.line_prefix, torchrun_console, teed[stream], fields);
    settings.rank = global_rank;
    settings.terminal = terminal_stream[stream];
    settings.universal_newlines = torchrun_console && teed[stream];
    if (to_console[stream] && (!torchrun_console || teed[stream])) settings.duplicate = filtered[stream];
    loop_.add_output(std::make_unique<CapturedOutput>(std::move(*pipes[stream]), std::move(settings), console_));
  }
}

void WorkerGroup::group_failing(const WorkerFailure& failure) {
  if (coordinator_) coordinator_->on_group_failing(failure);
}

void WorkerGroup::attempt_ended() {
  if (coordinator_) coordinator_->on_attempt_ended();
}

bool WorkerGroup::store_port_taken(const WorkerFailure& root) {
  return !coordinator_ && ports_.store_port_taken(root, attempt_started_);
}

// The loop's running children are the current attempt's running workers: an attempt starts only after the last one
// ended.
void WorkerGroup::signal_running_workers(int signal) { loop_.signal_children(signal); }

void WorkerGroup::waiting_for_exit(const std::vector<int>& local_ranks, int signal, Clock::time_point kill_at) {
  std::vector<int> ranks;
  std::vector<pid_t> pids;
  for (const RosterWorker& worker : workers_.current()) {
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

void WorkerGroup::not_restarted(const WorkerFailure& root) {
  const int left = plan_.max_restarts - policy_.record().restarts();
  console_.message(log::Level::Info,
                   "rank {} {}, which means bad input (config, arguments, data, a missing file: docs/exit-codes.md): "
                   "not restarted, since a restart would fail the same way ({} restart{} of --max-restarts {} left "
                   "unused); fix the input and launch again",
                   plan_.global_rank(root.local_rank), root.status.describe(), left, left == 1 ? "" : "s",
                   plan_.max_restarts);
}

void WorkerGroup::announce_restart(int attempt) {
  std::string why;
  for (const WorkerFailure& failure : policy_.record().failures()) {
    if (failure.attempt != attempt - 1 || failure.during_teardown) continue;
    why = failure.hung ? "rank " + std::to_string(plan_.global_rank(failure.local_rank)) + " hung"
                       : fmt_rank(failure.local_rank) + " " + failure.status.describe();
    break;
  }
  console_.message(log::Level::Info, "restarting all workers (attempt {} of {}){}; the failed attempt's logs are in {}",
                   policy_.record().restarts() + 1, plan_.max_restarts + 1, why.empty() ? "" : " after " + why,
                   log_layout::attempt_dir(plan_.run_dir, attempt - 1));
}

}  // namespace mgtrain
