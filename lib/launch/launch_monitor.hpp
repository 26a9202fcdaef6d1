// The launcher's monitoring inside the supervisor's event loop (a LoopParticipant): takes resource samples at
// log.resource_interval_s (resources.jsonl), publishes the status snapshot to the status server whenever
// the workers change or a sample was taken, and carries out the server's POST commands in the loop:
// /checkpoint = SIGUSR2 to every worker's group, /stop = as if the launcher got SIGUSR1.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "observe/resource_sampler.hpp"
#include "observe/status_server.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/supervisor.hpp"

namespace mgtrain {

class LaunchMonitor final : public LoopParticipant {
 public:
  // `server` and `gpus` may be null; resource_interval_s 0 writes no resources.jsonl.
  LaunchMonitor(Supervisor& supervisor, const LaunchPlan& plan, StatusServer* server, GpuStatsSource* gpus,
                double resource_interval_s);

  void add_fds(std::vector<pollfd>& fds) override;
  void on_ready(const pollfd& ready, std::chrono::steady_clock::time_point now) override;
  // The next sample, until the supervisor has finished (then only what wakes the loop anyway).
  std::optional<std::chrono::steady_clock::time_point> next_deadline() const override;
  void on_time(std::chrono::steady_clock::time_point now) override;
  void publish();  // hands the current state to the status server now

 private:
  void refresh_ranks();  // from the supervisor's workers

  Supervisor& supervisor_;
  const LaunchPlan& plan_;
  StatusServer* server_;
  ResourceSampler sampler_;
  std::chrono::steady_clock::duration row_interval_{};
  std::chrono::steady_clock::duration sample_interval_{};
  std::optional<std::chrono::steady_clock::time_point> next_row_;
  std::optional<std::chrono::steady_clock::time_point> next_sample_;
  std::vector<RankStatus> ranks_;
  std::string published_signature_;
  double start_time_ = 0;
  std::string driver_version_;
};

// Everything monitoring needs for one single-node launch, in the order that keeps it safe: called after
// the supervisor blocked its signals (threads started later inherit the mask, so signals still reach the
// loop's signalfd) and before any worker starts. Opens NVML (a GPU health line on the message stream when
// present), samples resources at log.resource_interval_s, and with launch.status_port binds the status
// server (UsageError naming the port when it cannot), writes <run dir>/status_token (0600) and
// <run dir>/status_endpoint, and joins the supervisor's loop.
class LaunchMonitoring {
 public:
  LaunchMonitoring(Supervisor& supervisor, const LaunchPlan& plan, const Config& config);
  ~LaunchMonitoring();
  LaunchMonitoring(const LaunchMonitoring&) = delete;
  LaunchMonitoring& operator=(const LaunchMonitoring&) = delete;

 private:
  Supervisor& supervisor_;
  std::unique_ptr<GpuStatsSource> gpus_;
  std::unique_ptr<StatusServer> server_;
  std::unique_ptr<LaunchMonitor> monitor_;
};

// "mgtrain: GPUs (NVML): 2 x NVIDIA H100 80GB HBM3 (79.6 GiB), driver 550.54.15" ("" without GPUs).
std::string gpu_health_line(const std::vector<GpuSample>& gpus, const std::string& driver_version);

}  // namespace mgtrain
