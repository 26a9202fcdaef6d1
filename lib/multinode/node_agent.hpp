// The node agent: `mgtrain launch` on one node of a multi-node job (docs/multinode.md). It hosts the
// rendezvous server when it is node 0 (static) or can bind the endpoint (dynamic), joins the
// rendezvous like every other node, and then runs each round's workers under the supervisor, whose event
// loop carries its sockets (a LoopParticipant) and which it drives as its AttemptCoordinator: the
// server's assignment gives the node rank, the ranks and the workers' store; a local failure is
// reported at once and a stop order from the server tears the local workers down, so every node
// stops within seconds; restarts and the exit code are the server's decisions, for the whole job.
#pragma once

#include <poll.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config_loader.hpp"
#include "config/config_request.hpp"
#include "host/port_probe.hpp"
#include "multinode/rendezvous_client.hpp"
#include "multinode/rendezvous_hosting.hpp"
#include "multinode/rendezvous_server.hpp"
#include "multinode/stacks_across_nodes.hpp"
#include "process/event_loop.hpp"
#include "replicate/snapshot_replication.hpp"
#include "supervise/failure_report.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/supervisor.hpp"
#include "util/environment.hpp"
#include "wire/frame_auth.hpp"
#include "wire/node_status.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain {

class NodeAgent;

// What the agent takes from the launch around it (launch/launch_environment.hpp has the whole set).
struct NodeAgentOutside {
  int stdout_fd = 1;  // the console
  int stderr_fd = 2;
  // The config loaded again with another run id, for a node that was started without one and adopts
  // node 0's (so ${run_id} expands to it). Unset: only launch.run_id changes.
  std::function<LoadedConfig(const std::string& run_id)> reload_with_run_id;
  // The job's rendezvous secret (launch/rendezvous_secret.hpp); none: frames are not authenticated.
  rdzv::RendezvousToken token;
  // What this node collects about its ranks when a hang is found (launch/rank_diagnostics.hpp); none: nothing.
  HangDiagnostics* diagnostics = nullptr;
  // This node's monitoring (launch/launch_monitor.hpp: resource samples, its ranks reported to the job's host, and on
  // the host the job-wide status API), started once the agent is attached to the supervisor and kept until the
  // supervisor's run returns. Unset: none.
  std::function<std::shared_ptr<void>(Supervisor& supervisor, NodeAgent& agent)> monitoring;
};

// How this node's part of the job ended.
struct NodeAgentResult {
  int exit_code = 0;                       // the launcher's exit code (docs/exit-codes.md)
  int node_rank = 0;                       // this node's rank in the last round (dynamic: assigned on arrival)
  bool workers_saved_and_stopped = false;  // this node's workers of the last round all exited 75, none failed:
                                           // on node 0 that means global rank 0 finished writing its checkpoint
  std::optional<FailureReport> failure;    // the failure report this node printed (its own workers' or the job's)
  std::optional<int> launcher_signal;      // this agent was stopped by this signal (SIGTERM: a SLURM time limit?)
  // The agent that hosted the rendezvous: the job's rounds and run id (run.json); elsewhere empty.
  std::vector<rdzv::RoundRecord> job_rounds;
  std::string job_run_id;
};

// One node agent for the length of the job: a participant of the supervisor's event loop (its RendezvousLink's
// sockets and timers) and the supervisor's AttemptCoordinator. It joins, turns the server's messages into attempts
// (an assignment starts one, a stop or regroup stops it, kDiagnose collects this node's diagnostics), reports its
// workers' failures, hangs and ends to the server, and ends this node's part as the server decides (finish,
// reject) or when the server is lost; then it reports how its part ended.
class NodeAgent final : public LoopParticipant, public AttemptCoordinator {
 public:
  using Clock = std::chrono::steady_clock;

  NodeAgent(LaunchPlan plan, const LoadedConfig& loaded, const NodeAgentOutside& outside)
      : plan_(std::move(plan)), loaded_(loaded), outside_(outside) {}
  NodeAgent(const NodeAgent&) = delete;  // its link prints through it
  NodeAgent& operator=(const NodeAgent&) = delete;

  // The supervisor that runs this node's workers, and this agent's link to the rendezvous (`server`: null unless
  // it hosts); `agent_id` is what it joins as.
  void attach(Supervisor& supervisor, std::unique_ptr<RendezvousServer> server,
              std::unique_ptr<RendezvousClient> client, std::string agent_id);
  // This node's snapshot replication (joined with its port, told each round's buddy, in the status reports).
  void set_replication(SnapshotReplication* replication) { replication_ = replication; }
  // A line on this node's console.
  void say(const std::string& line);

  // ---- the job-wide status (docs/monitoring.md#several-nodes) ----
  // This node's ranks of round `status.round` (this one or an earlier one) to the job's host (dropped before the
  // first round and once the job ends).
  void report_status(rdzv::NodeStatus status);
  // On the agent that hosts the rendezvous: every member's latest report of the current round; elsewhere empty.
  std::vector<rdzv::NodeStatus> job_status() const;
  // On the agent that hosts the rendezvous: every round so far and the job's run id ("" before the first round);
  // elsewhere nothing.
  std::vector<rdzv::RoundRecord> job_rounds() const;
  std::string job_run_id() const;
  // Whether this agent hosts the rendezvous (and so serves the job-wide view), and where the rendezvous is.
  bool hosts_rendezvous() const { return link_ && link_->server() != nullptr; }
  std::string rendezvous_endpoint() const;
  // ---- stacks on demand across nodes (stacks_across_nodes.hpp) ----
  // How this node dumps its running ranks when the job's host asks (kDumpStacks): `answer` is called once, on the
  // loop, with the node's dump, within `timeout_s` or its own cap (unset: the node answers that it cannot).
  using StacksDumper = std::function<void(double timeout_s, std::function<void(rdzv::NodeStacks)> answer)>;
  void set_stacks_dumper(StacksDumper dumper) { stacks_dumper_ = std::move(dumper); }
  // On the agent that hosts the rendezvous: POST /stacks for the whole job. start: every node of the running round
  // dumps (why not, when it cannot start); take: the answers, once all came or the deadline passed.
  std::optional<rdzv::StacksRefusal> start_job_stacks(double timeout_s);
  std::optional<rdzv::JobStacks> take_job_stacks();
  // "node 1 (hostB, 10.77.0.2)" in the current round ("" before the first).
  const std::string& current_node_name() const { return node_name_; }

  // ---- LoopParticipant ----
  void add_fds(std::vector<pollfd>& fds) override;
  void on_ready(const pollfd& ready, Clock::time_point now) override;
  std::optional<Clock::time_point> next_deadline() const override;
  void on_time(Clock::time_point now) override;

  // ---- AttemptCoordinator ----
  void on_group_failing(const WorkerFailure& failure) override;
  // A hang: the workers run until the server has every node's diagnostics (hang_across_nodes.hpp).
  void on_hang_detected() override;
  void on_hang_diagnosed() override;
  void on_attempt_ended() override;
  void on_signal_during_teardown(int signal) override;
  bool done(Clock::time_point now) const override;

  // How this node's part ended, once the supervisor's run returned `result`; prints what ended it.
  NodeAgentResult result(const SupervisionResult& result);

 private:
  struct Ending {
    int exit_code = 0;
    std::string text;
    std::optional<rdzv::NodeFailure> cause;
    bool rejected = false;
  };

  int report(const SupervisionResult& result);
  std::string node_name() const;
  void emit_report(const FailureReport& report);
  void handle(const rdzv::Message& message);
  void dump_stacks_for_server(const rdzv::Message& message);
  void start_round(const rdzv::Assignment& assignment);
  void prepare_run(const std::string& run_id);
  void end_job(int code, const std::string& text, std::optional<rdzv::NodeFailure> cause, bool rejected);
  void stop_workers(const std::string& why);
  void server_lost(const std::string& what, bool silent);
  void refused_by_token(const std::string& what);
  void check_client();

  LaunchPlan plan_;          // this node's own; each round's copy goes to the supervisor with begin_attempt
  std::string config_file_;  // <run_dir>/config.yaml, once the run id is final
  const LoadedConfig& loaded_;
  std::optional<LoadedConfig> adopted_;
  const NodeAgentOutside& outside_;
  Supervisor* supervisor_ = nullptr;
  std::optional<RendezvousLink> link_;
  std::string agent_id_;
  int round_ = -1;
  std::optional<FailureReport> emitted_report_;
  std::string node_name_;  // "node 1 (hostB, 10.77.0.2)", as the server names this node in the current round
  bool run_ready_ = false;
  std::string threads_notice_;  // the OMP_NUM_THREADS notice said last (choose_worker_threads)
  std::optional<Ending> ending_;
  std::vector<rdzv::NodeFailure> waiting_;  // a hang's other stalled ranks, from the server's finish
  StacksDumper stacks_dumper_;
  SnapshotReplication* replication_ = nullptr;
};

// Runs this node's part of the job described by `plan` (plan.multi_node()). Each round's plan (node
// rank, ranks, workers' store, run directory) is made from it and handed to the supervisor; with
// plan.builtin_trainer the workers get the run's config file (worker_command). Messages go to
// outside's descriptors.
NodeAgentResult run_node_agent(const LaunchPlan& plan, const LoadedConfig& loaded, const EnvMap& environment,
                               const NodeAgentOutside& outside, PortProbe& ports);

}  // namespace mgtrain
