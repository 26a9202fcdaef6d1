// The launcher's event loop: starts the worker group, pumps its output, reacts to worker exits,
// signals, heartbeats and deadlines as they happen (signalfd + ppoll, no sleeping), carries out
// SupervisionPolicy's orders, and gathers the failure report.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/console_writer.hpp"
#include "core/failure_report.hpp"
#include "core/heartbeat_file.hpp"
#include "core/launch_plan.hpp"
#include "core/orphan_guard.hpp"
#include "core/port_probe.hpp"
#include "core/signal_channel.hpp"
#include "core/stream_capture.hpp"
#include "core/supervision_policy.hpp"
#include "core/worker_env.hpp"

namespace mgtrain {

struct SupervisionResult {
  int exit_code = 0;
  std::optional<int> launcher_signal;     // the launcher was stopped by this signal
  bool stopped_after_checkpoint = false;  // the workers saved a checkpoint and stopped on request (exit 75)
  int attempts = 1;                       // attempts started
  std::optional<FailureReport> failure;   // set when a worker failed in the last attempt
};

class Supervisor : private WorkerGroupControl {
 public:
  // `first_port` is the master port of attempt 0 (already checked or picked). Later attempts pick a
  // fresh port through `ports` when plan.picks_port().
  Supervisor(const LaunchPlan& plan, EnvMap parent_environment, std::string config_file, PortProbe& ports,
             int first_port, int console_stdout_fd = 1, int console_stderr_fd = 2);
  // Whatever still runs (after an exception) is killed and reaped.
  ~Supervisor() override;

  // Runs the job to its end. Throws UsageError when the command cannot be executed.
  SupervisionResult run();

 private:
  struct Worker {
    int local_rank = 0;
    pid_t pid = -1;
    bool alive = false;
    std::unique_ptr<HeartbeatFile> heartbeat;
  };

  void start_workers(int attempt) override;
  void signal_running_workers(int signal) override;

  void handle_signals(std::chrono::steady_clock::time_point now);
  void handle_child_exits(std::chrono::steady_clock::time_point now);
  void probe_heartbeats(std::chrono::steady_clock::time_point now);
  void kill_and_reap_all();
  FailedWorker describe_failure(const WorkerFailure& failure) const;
  FailureReport build_failure_report() const;

  const LaunchPlan& plan_;
  EnvMap parent_environment_;
  std::string config_file_;
  PortProbe& ports_;
  int first_port_;

  SignalChannel signals_;
  OrphanGuard guard_;
  ConsoleWriter console_;
  SupervisionPolicy policy_;

  std::vector<Worker> workers_;                         // the current attempt's
  std::vector<std::vector<pid_t>> pids_by_attempt_;     // for the report
  std::vector<std::unique_ptr<StreamCapture>> captures_;  // open streams of any attempt
  std::chrono::steady_clock::time_point started_steady_;
  std::chrono::system_clock::time_point started_wall_;
  std::optional<std::chrono::steady_clock::time_point> next_heartbeat_probe_;
};

}  // namespace mgtrain
