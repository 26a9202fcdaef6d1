// Resource sampling, status snapshots and status commands in the supervisor's event loop (see launch_monitor.hpp).
#include "launch/launch_monitor.hpp"

#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>

#include "contract/log_layout.hpp"
#include "observe/status_token.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;

// With the status server on, the dashboard's CPU/GPU figures are refreshed this often even when
// resources.jsonl gets rows more rarely (or none).
constexpr auto kStatusSampleInterval = std::chrono::seconds(2);

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

LaunchMonitor::LaunchMonitor(Supervisor& supervisor, const LaunchPlan& plan, StatusServer* server, GpuStatsSource* gpus,
                             double resource_interval_s)
    : supervisor_(supervisor),
      plan_(plan),
      server_(server),
      sampler_(gpus, plan.node_rank, resource_interval_s > 0 ? plan.run_dir + "/resources.jsonl" : ""),
      start_time_(unix_now()) {
  const Clock::time_point now = Clock::now();
  if (resource_interval_s > 0) {
    row_interval_ = steady_seconds(resource_interval_s);
    sample_interval_ = row_interval_;
    next_row_ = now + row_interval_;
  }
  if (server_ && (sample_interval_ == Clock::duration::zero() || sample_interval_ > kStatusSampleInterval)) {
    sample_interval_ = kStatusSampleInterval;
  }
  if (sample_interval_ > Clock::duration::zero()) next_sample_ = now;  // a first reading right away: CPU% needs two
  if (gpus) driver_version_ = gpus->driver_version();
}

void LaunchMonitor::add_fds(std::vector<pollfd>& fds) {
  if (server_) fds.push_back(pollfd{server_->command_fd(), POLLIN, 0});
}

void LaunchMonitor::on_ready(const pollfd&, Clock::time_point) {
  for (StatusCommand command : server_->take_commands()) {
    // The same paths as the signals: USR2 is forwarded (workers save and go on), USR1 is forwarded and
    // the workers save and exit 75, which ends the launcher with 75 (docs/monitoring.md).
    supervisor_.act_on_signal(command == StatusCommand::kCheckpoint ? SIGUSR2 : SIGUSR1);
  }
}

std::optional<Clock::time_point> LaunchMonitor::next_deadline() const {
  if (supervisor_.policy().finished()) return std::nullopt;
  return next_sample_;
}

void LaunchMonitor::refresh_ranks() {
  std::vector<RankStatus> ranks;
  for (const Supervisor::WorkerView& worker : supervisor_.worker_views()) {
    RankStatus rank;
    rank.rank = worker.global_rank;
    rank.local_rank = worker.local_rank;
    rank.pid = worker.pid;
    rank.state = worker.alive ? "running" : "exited";
    rank.heartbeat_file = server_ ? log_layout::heartbeat_file(log_layout::rank_dir(
                                        plan_.run_dir, supervisor_.policy().attempt(), worker.global_rank))
                                  : "";
    for (const RankStatus& old : ranks_) {  // keep the last sample's figures of the same process
      if (old.pid == rank.pid && worker.alive) {
        rank.cpu_percent = old.cpu_percent;
        rank.rss_bytes = old.rss_bytes;
      }
    }
    ranks.push_back(std::move(rank));
  }
  ranks_ = std::move(ranks);
}

void LaunchMonitor::on_time(Clock::time_point now) {
  refresh_ranks();
  bool sampled = false;
  if (next_sample_ && now >= *next_sample_) {
    const bool write_row = next_row_ && now >= *next_row_;
    sampler_.sample(ranks_, write_row);
    if (write_row) next_row_ = now + row_interval_;
    next_sample_ = now + sample_interval_;
    sampled = true;
  }
  if (!server_) return;
  std::string signature =
      std::to_string(supervisor_.policy().attempt()) + (supervisor_.policy().attempt_running() ? "r" : "s");
  for (const RankStatus& rank : ranks_) signature += "," + std::to_string(rank.pid) + rank.state;
  if (sampled || signature != published_signature_) {
    published_signature_ = signature;
    publish();
  }
}

void LaunchMonitor::publish() {
  const SupervisionPolicy& policy = supervisor_.policy();
  StatusSnapshot snapshot;
  snapshot.run_id = plan_.run_id;
  snapshot.run_dir = plan_.run_dir;
  snapshot.hostname = plan_.hostname;
  snapshot.node_rank = plan_.node_rank;
  snapshot.attempt = policy.attempt();
  snapshot.max_restarts = plan_.max_restarts;
  if (policy.attempt_running()) {
    snapshot.phase = "running";
  } else if (policy.finished()) {
    snapshot.phase = "finished";
  } else if (policy.waiting()) {
    snapshot.phase = "waiting";
  } else {
    snapshot.phase = ranks_.empty() ? "starting" : "stopping";
  }
  snapshot.time = unix_now();
  snapshot.start_time = start_time_;
  snapshot.ranks = ranks_;
  snapshot.gpus = sampler_.gpus();
  snapshot.driver_version = driver_version_;
  if (sampler_.last_sample_time() > 0) snapshot.gpu_sample_time = sampler_.last_sample_time();
  server_->publish(snapshot);
}

}  // namespace mgtrain

namespace mgtrain {

std::string gpu_health_line(const std::vector<GpuSample>& gpus, const std::string& driver_version) {
  if (gpus.empty()) return "";
  // Same model and size: "2 x NAME (80.0 GiB)"; otherwise one entry per kind, in index order.
  std::vector<std::pair<std::string, int>> kinds;
  for (const GpuSample& gpu : gpus) {
    char memory[32] = "";
    if (gpu.memory_total_bytes > 0)
      std::snprintf(memory, sizeof memory, " (%.1f GiB)", gpu.memory_total_bytes / 1073741824.0);
    const std::string kind = (gpu.name.empty() ? std::string("unknown GPU") : gpu.name) + memory;
    if (!kinds.empty() && kinds.back().first == kind) {
      ++kinds.back().second;
    } else {
      kinds.emplace_back(kind, 1);
    }
  }
  std::string line = "mgtrain: GPUs (NVML): ";
  for (std::size_t i = 0; i < kinds.size(); ++i)
    line += (i ? ", " : "") + std::to_string(kinds[i].second) + " x " + kinds[i].first;
  if (!driver_version.empty()) line += ", driver " + driver_version;
  return line;
}

LaunchMonitoring::LaunchMonitoring(Supervisor& supervisor, const LaunchPlan& plan, const Config& config)
    : supervisor_(supervisor) {
  const LaunchConfig& launch = config.launch;
  const double interval = config.log.resource_interval_s;
  gpus_ = open_nvml();  // nullptr without the NVIDIA driver: no GPU statistics, not an error
  if (gpus_) {
    const std::string line = gpu_health_line(gpus_->sample(), gpus_->driver_version());
    if (!line.empty()) log::text(line + "\n");
  }
  if (launch.status_port > 0) {
    StatusServer::Options options;
    options.bind = launch.status_bind;
    options.port = static_cast<int>(launch.status_port);
    options.run_dir = plan.run_dir;
    options.token = generate_status_token();
    server_ = std::make_unique<StatusServer>(options);  // binds now: a busy port fails before any worker starts
    const std::string token_file = plan.run_dir + "/status_token";
    write_status_token_file(token_file, options.token);
    const std::string endpoint_file = plan.run_dir + "/status_endpoint";
    std::ofstream(endpoint_file, std::ios::trunc) << server_->endpoint() << "\n";
    log::info("status API and dashboard on http://{}/ (POST needs the token in {})", server_->endpoint(), token_file);
  }
  if (!server_ && interval <= 0) return;
  monitor_ = std::make_unique<LaunchMonitor>(supervisor, plan, server_.get(), gpus_.get(), interval);
  supervisor.add_participant(*monitor_);
  if (server_) monitor_->publish();  // a first snapshot (run id, no ranks yet) before serving
  if (server_) server_->start();
}

LaunchMonitoring::~LaunchMonitoring() {
  if (monitor_) supervisor_.remove_participant(*monitor_);
  monitor_.reset();
  server_.reset();  // stops serving before NVML goes
}

}  // namespace mgtrain
