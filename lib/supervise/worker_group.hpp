// The node's worker group as SupervisionPolicy sees it (WorkerGroupControl): starts an attempt's workers on the
// event loop (their run folders, environment, terminals, and their streams into logs and the console), signals
// them, says on the console what the policy decided, and hands hang detection's questions and orders to
// HangResponse and the store port's to StorePorts.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/snapshot_stores.hpp"
#include "output/console_writer.hpp"
#include "process/event_loop.hpp"
#include "supervise/hang_response.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/store_ports.hpp"
#include "supervise/supervision_policy.hpp"
#include "supervise/worker_roster.hpp"
#include "util/environment.hpp"

namespace mgtrain {

class FilteredLog;

class WorkerGroup final : public WorkerGroupControl {
 public:
  using Clock = std::chrono::steady_clock;

  // Every reference is the supervisor's and outlives this object; `plan` is the current attempt's (its
  // restart_count is set here), `coordinator` the node agent (null on a single node).
  WorkerGroup(LaunchPlan& plan, const std::string& config_file, const EnvMap& parent_environment,
              ConsoleWriter& console, EventLoop& loop, WorkerRoster& workers, const SupervisionPolicy& policy,
              StorePorts& ports, HangResponse& hang, AttemptCoordinator* const& coordinator);

  Clock::time_point attempt_started() const { return attempt_started_; }
  SnapshotStores& snapshot_stores() { return snapshots_; }

  void start_workers(int attempt) override;
  void signal_running_workers(int signal) override;
  void waiting_for_exit(const std::vector<int>& local_ranks, int signal, Clock::time_point kill_at) override;
  void not_restarted(const WorkerFailure& root) override;
  void group_failing(const WorkerFailure& failure) override;
  void attempt_ended() override;
  bool store_port_taken(const WorkerFailure& root) override;
  bool worker_stopped(int local_rank) override { return hang_.worker_stopped(local_rank); }
  void kill_worker(int local_rank) override { hang_.kill_worker(local_rank); }
  void no_progress_yet(int local_rank) override { hang_.no_progress_yet(local_rank); }
  void hang_detected(const HangVerdict& verdict, Clock::time_point deadline) override {
    hang_.hang_detected(verdict, deadline);
  }
  void hang_diagnosed() override { hang_.hang_diagnosed(); }

 private:
  // One console line: which attempt, after what, where the logs are.
  void announce_restart(int attempt);
  // One worker of `attempt`: its run folder, process and streams.
  void start_worker(int attempt, int local_rank, int port, const std::shared_ptr<FilteredLog> (&filtered)[2]);

  LaunchPlan& plan_;
  const std::string& config_file_;
  const EnvMap& parent_environment_;
  ConsoleWriter& console_;
  EventLoop& loop_;
  WorkerRoster& workers_;
  const SupervisionPolicy& policy_;
  StorePorts& ports_;
  HangResponse& hang_;
  AttemptCoordinator* const& coordinator_;
  SnapshotStores snapshots_;  // kept across attempts and rounds
  Clock::time_point attempt_started_;
};

}  // namespace mgtrain
