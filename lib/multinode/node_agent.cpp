// The node agent (see node_agent.hpp): its rendezvous messages, its attempts, its end, and run_node_agent.
#include "multinode/node_agent.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "config/config_yaml.hpp"
#include "contract/log_layout.hpp"
#include "multinode/hang_across_nodes.hpp"
#include "multinode/node_failure.hpp"
#include "output/console_writer.hpp"
#include "supervise/run_directory.hpp"
#include "supervise/worker_env.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain {

void NodeAgent::attach(Supervisor& supervisor, std::unique_ptr<RendezvousServer> server,
                       std::unique_ptr<RendezvousClient> client, std::string agent_id) {
  supervisor_ = &supervisor;
  link_.emplace(std::move(server), std::move(client),
                rdzv::SilenceRule{plan_.node_heartbeat_interval_s, plan_.node_timeout_s},
                [this](const std::string& line) { say(line); });
  agent_id_ = std::move(agent_id);
}

void NodeAgent::say(const std::string& line) { supervisor_->console().message(log::Level::Info, "{}", line); }

// ---- the job-wide status -------------------------------------------------------------------

void NodeAgent::report_status(rdzv::NodeStatus status) {
  if (round_ < 0 || ending_ || !link_ || status.round < 0 || status.round > round_) return;
  status.node_rank = plan_.node_rank;
  status.host = plan_.hostname;
  if (replication_) status.replication = replication_->status();
  link_->client().send_report(status.to_message());
}

std::vector<rdzv::NodeStatus> NodeAgent::job_status() const {
  std::vector<rdzv::NodeStatus> nodes;
  if (!link_ || !link_->server()) return nodes;
  for (const auto& [node_rank, status] : link_->server()->node_status()) nodes.push_back(status);
  return nodes;
}

std::vector<rdzv::RoundRecord> NodeAgent::job_rounds() const {
  if (!link_ || !link_->server()) return {};
  return link_->server()->history();
}

std::string NodeAgent::job_run_id() const {
  if (!link_ || !link_->server()) return "";
  return link_->server()->run_id();
}

// ---- stacks on demand across nodes ----------------------------------------------------------

std::optional<rdzv::StacksRefusal> NodeAgent::start_job_stacks(double timeout_s) {
  if (!link_ || !link_->server()) return rdzv::StacksRefusal{false, "this node does not host the job's rendezvous"};
  return link_->server()->start_stacks(timeout_s, Clock::now());
}

std::optional<rdzv::JobStacks> NodeAgent::take_job_stacks() {
  if (!link_ || !link_->server()) return std::nullopt;
  return link_->server()->take_stacks(Clock::now());
}

// kDumpStacks: this node's running ranks dumped into its own run folder, the answer sent when the dump ends; the
// workers go on. The dumper bounds the time it takes.
void NodeAgent::dump_stacks_for_server(const rdzv::Message& message) {
  rdzv::NodeStacks base;
  base.request = static_cast<int>(message.integer("request"));
  base.round = static_cast<int>(message.integer("round"));
  const double timeout_s = message.number("timeout");
  if (!(timeout_s > 0)) throw rdzv::ProtocolError("dump-stacks message: timeout is not positive");
  base.node_rank = plan_.node_rank;
  base.host = plan_.hostname;
  auto send = [this, base](rdzv::NodeStacks stacks) {
    if (!link_ || ending_ || round_ != base.round) return;  // the round is over: nobody waits for it
    stacks.request = base.request;
    stacks.round = base.round;
    stacks.node_rank = base.node_rank;
    stacks.host = base.host;
    link_->client().send(stacks.to_message());
  };
  if (base.round != round_ || ending_ || !stacks_dumper_ || !supervisor_->policy().attempt_running()) {
    rdzv::NodeStacks none = base;
    none.outcome = rdzv::NodeStacksOutcome::kNotRunning;
    none.message = stacks_dumper_ ? "no worker of this node runs now" : "this node cannot dump its ranks' stacks";
    if (link_ && !ending_) link_->client().send(none.to_message());
    return;
  }
  stacks_dumper_(timeout_s, std::move(send));
}

std::string NodeAgent::rendezvous_endpoint() const { return link_ ? link_->client().endpoint() : std::string(); }

// ---- LoopParticipant -----------------------------------------------------------------------

void NodeAgent::add_fds(std::vector<pollfd>& fds) { link_->add_fds(fds); }

void NodeAgent::on_ready(const pollfd& ready, Clock::time_point now) {
  if (link_->serve(ready, now)) return;
  RendezvousClient& client = link_->client();
  try {
    client.on_ready(ready, now);
  } catch (const AuthenticationError& error) {
    if (!ending_) refused_by_token(std::string("failed authentication: ") + error.what());
    return;
  } catch (const rdzv::ProtocolError& error) {
    if (!ending_)
      end_job(exit_code::kUsage,
              fmt::format("{} is not an mgtrain rendezvous server of this version: {}; check --master-addr/"
                          "--master-port (--rdzv-endpoint) and that every node runs the same mgtrain",
                          client.endpoint(), error.what()),
              std::nullopt, true);
    return;
  }
  if (client.take_connected_event()) {
    rdzv::JoinRequest join = join_request_for(plan_, loaded_, agent_id_);
    join.replica_port = replication_ ? replication_->port() : 0;
    client.send(join.to_message());
  }
  for (const rdzv::Message& message : client.take_messages()) {
    try {
      handle(message);
    } catch (const rdzv::ProtocolError& error) {
      if (!ending_)
        end_job(exit_code::kUsage,
                fmt::format("bad message from the rendezvous server {}: {}", client.endpoint(), error.what()),
                std::nullopt, true);
    }
  }
  check_client();
}

std::optional<NodeAgent::Clock::time_point> NodeAgent::next_deadline() const {
  return link_->next_deadline(supervisor_->policy().finished(), !ending_);
}

void NodeAgent::on_time(Clock::time_point now) {
  if (auto silent = link_->on_time(now, supervisor_->policy().finished(), !ending_)) server_lost(*silent, true);
  check_client();
}

// ---- AttemptCoordinator --------------------------------------------------------------------

void NodeAgent::on_group_failing(const WorkerFailure& failure) {
  if (round_ < 0 || ending_) return;
  FailedWorker worker = supervisor_->describe_failure(failure);
  rdzv::NodeFailure report = node_failure_from(worker, round_, plan_.node_rank, node_name());
  say(fmt::format("rank {} failed ({}); telling the other nodes", worker.global_rank, worker.outcome()));
  link_->client().send(rdzv::workers_failed_message(report));
}

void NodeAgent::on_hang_detected() { link_->client().send(hang_found_for(*supervisor_, plan_, round_, node_name())); }

void NodeAgent::on_hang_diagnosed() {
  say("the workers of " + node_name() + " keep running until every node has its ranks' stacks");
  link_->client().send(diagnosed_for(*supervisor_, plan_, round_, node_name()));
}

void NodeAgent::on_attempt_ended() {
  const SupervisionPolicy& policy = supervisor_->policy();
  if (policy.finished()) {  // the launcher got a signal: this node leaves the job
    if (policy.record().launcher_signal()) link_->leave_on_signal(plan_, *policy.record().launcher_signal());
    return;
  }
  std::string outcome;
  int code = 0;
  if (policy.record().attempt_succeeded()) {
    outcome = policy.record().stopped_after_checkpoint() ? rdzv::kEndedCheckpoint : rdzv::kEndedSuccess;
    code = policy.record().stopped_after_checkpoint() ? exit_code::kStoppedAfterCheckpoint : 0;
  } else if (!policy.record().root_cause()) {
    outcome = rdzv::kEndedStopped;
  } else {
    outcome = rdzv::kEndedFailed;
    code = policy.record().exit_code();
  }
  if (round_ >= 0) link_->client().send(rdzv::workers_ended_message(round_, outcome, code));
  if (ending_) supervisor_->finish(ending_->exit_code);
}

void NodeAgent::on_signal_during_teardown(int signal) {
  log::info("{} while the job's end is being passed on: leaving now", signal_name(signal));
  link_->close_now();
}

bool NodeAgent::done(Clock::time_point now) const { return link_->done(now); }

// ---- the end -------------------------------------------------------------------------------

NodeAgentResult NodeAgent::result(const SupervisionResult& result) {
  NodeAgentResult outcome;
  outcome.exit_code = report(result);
  outcome.node_rank = plan_.node_rank;
  outcome.workers_saved_and_stopped = result.stopped_after_checkpoint && !result.failure;
  outcome.failure = emitted_report_;  // for the launcher's TORCHELASTIC_ERROR_FILE
  outcome.launcher_signal = result.launcher_signal;
  outcome.job_rounds = job_rounds();
  outcome.job_run_id = job_run_id();
  return outcome;
}

int NodeAgent::report(const SupervisionResult& result) {
  const int code = result.exit_code;
  if (result.launcher_signal) {
    if (result.failure) emit_report(*result.failure);
    if (round_ < 0) {
      log::info("stopped by {} while waiting for the rendezvous at {}; no worker was started (exit code {})",
                signal_name(*result.launcher_signal), link_->client().endpoint(), code);
      return code;
    }
    log::info(
        "stopped by {}; the workers of this node (run {}) have exited and the other nodes were told (exit code {})",
        signal_name(*result.launcher_signal), plan_.run_id, code);
    return code;
  }
  if (!ending_) return code;
  const Ending& ending = *ending_;
  if (round_ < 0 && !ending.rejected && (code == 0 || code == exit_code::kStoppedAfterCheckpoint)) {
    log::info("the job ended (exit code {}) while this node waited as a standby; it ran no worker", code);
    return code;
  }
  if (ending.rejected || (!ending.cause && code != 0 && code != exit_code::kStoppedAfterCheckpoint)) {
    log::error("{}", ending.text);
    return code;
  }
  if (!ending.cause) {
    if (code == exit_code::kStoppedAfterCheckpoint) {
      log::info(
          "the workers of run {} saved a checkpoint and stopped on request; run the same command on every node "
          "again to resume (exit code {})",
          plan_.run_id, code);
    }
    return code;
  }
  emit_report(job_failure_report(*ending.cause, waiting_, supervisor_->local_failure_report(), plan_, node_name(),
                                 round_, code));
  log::info("{}", ending.text);
  return code;
}

std::string NodeAgent::node_name() const {
  if (round_ >= 0 && !node_name_.empty()) return node_name_;
  return fmt::format("node {} ({})", plan_.node_rank, plan_.hostname);
}

void NodeAgent::emit_report(const FailureReport& report) {
  emitted_report_ = report;
  log::text(format_failure_report(report));
  if (run_ready_) write_run_file(log_layout::failure_json(plan_.run_dir), failure_report_to_json(report));
}

// ---- the rendezvous -----------------------------------------------------------------------

void NodeAgent::handle(const rdzv::Message& message) {
  using rdzv::MessageType;
  switch (message.type) {
    case MessageType::kHeartbeat:
      link_->answer_heartbeat();
      return;
    case MessageType::kAssign:
      return start_round(rdzv::Assignment::from(message));
    case MessageType::kWait:
      say(message.text("text"));
      return;
    case MessageType::kStop:
    case MessageType::kRegroup:
      // kRegroup: a node arrived (elastic scale-up), not a failure; the server sends the larger round's
      // assignment once every node's workers have exited.
      if (message.integer("round") != round_ || !supervisor_->policy().attempt_running()) return;
      stop_workers(message.text("reason"));
      return;
    case MessageType::kDiagnose:
      if (message.integer("round") != round_ || ending_) return;
      if (auto answer = diagnose_for_server(*supervisor_, message, round_)) link_->client().send(*answer);
      return;
    case MessageType::kDumpStacks:
      return dump_stacks_for_server(message);
    case MessageType::kFinish: {
      std::optional<rdzv::NodeFailure> cause;
      if (message.flag("has_cause")) cause = rdzv::NodeFailure::read_from(message, "cause.");
      if (message.has("waiting.count")) waiting_ = rdzv::read_failures(message, "waiting.", rdzv::kMaxListedWaiting);
      if (!ending_) end_job(static_cast<int>(message.integer("exit_code")), message.text("text"), cause, false);
      return;
    }
    case MessageType::kReject:
      if (!ending_) end_job(static_cast<int>(message.integer("exit_code")), message.text("text"), std::nullopt, true);
      return;
    default:
      throw rdzv::ProtocolError("the server sent a " + rdzv::type_name(message.type) +
                                " message, which only agents send");
  }
}

void NodeAgent::start_round(const rdzv::Assignment& assignment) {
  if (ending_ || !supervisor_->policy().waiting()) return;
  if (assignment.nproc_per_node.at(assignment.node_rank) != plan_.nproc) {
    throw rdzv::ProtocolError(fmt::format("assignment gives node {} {} workers, this node runs {}",
                                          assignment.node_rank, assignment.nproc_per_node.at(assignment.node_rank),
                                          plan_.nproc));
  }
  round_ = assignment.round;
  node_name_ = assignment.node_name;
  plan_ = plan_for_round(plan_, assignment);
  if (!run_ready_) prepare_run(assignment.run_id);
  say(round_line(plan_, round_, node_name()));
  if (replication_) replication_->start_round(assignment);
  // Said again only when a round changes it (an elastic round with other nodes on this node's CPUs).
  if (std::string notice = choose_worker_threads(plan_, current_environment()).notice; notice != threads_notice_) {
    threads_notice_ = notice;
    if (!notice.empty()) say(notice);
  }
  try {
    supervisor_->begin_attempt(round_, plan_, config_file_);
  } catch (const Error& error) {
    // This node cannot run its workers (program not found, log directory not writable, ...): its own
    // error, with its exit code, is what every node reports, not "node lost".
    const std::string why = std::string("could not start its workers: ") + error.what();
    link_->client().send(rdzv::leave_message(error.exit_code(), why));
    end_job(error.exit_code(), fmt::format("{} {}", node_name(), why), std::nullopt, true);
  }
}

// The run id is final once the first round starts: a node without one adopts node 0's.
void NodeAgent::prepare_run(const std::string& run_id) {
  const LoadedConfig* config = &loaded_;
  if (run_id != plan_.run_id) {
    say("using run id " + run_id + " of the other nodes (none was given here)");
    if (outside_.reload_with_run_id) {
      adopted_ = outside_.reload_with_run_id(run_id);
    } else {
      adopted_ = loaded_;
      adopted_->config.launch.run_id = run_id;
    }
    config = &*adopted_;
  }
  const std::string log_dir = std::filesystem::path(plan_.run_dir).parent_path().string();
  plan_.run_id = run_id;
  std::string node_directory =
      plan_.dynamic ? fmt::format("agent_{}_{}", plan_.hostname, getpid()) : fmt::format("node_{}", plan_.node_rank);
  plan_.run_dir = log_dir + "/" + run_id + "/" + node_directory;
  const std::string archived = prepare_run_directory(plan_.run_dir);
  if (!archived.empty()) say("run " + run_id + " was launched before on this node; its logs are kept in " + archived);
  config_file_ = log_layout::config_file(plan_.run_dir);
  write_run_file(config_file_, config_to_yaml(config->config));
  run_ready_ = true;
}

void NodeAgent::end_job(int code, const std::string& text, std::optional<rdzv::NodeFailure> cause, bool rejected) {
  ending_ = Ending{code, text, std::move(cause), rejected};
  const SupervisionPolicy& policy = supervisor_->policy();
  if (policy.finished()) return;
  if (policy.waiting()) {
    supervisor_->finish(code);
  } else if (policy.attempt_running()) {
    stop_workers(rejected ? "" : text);
  }  // stopping already: on_attempt_ended finishes
}

// One line: why, what the stop waits for, when it would SIGKILL (the wait ends with the last worker).
void NodeAgent::stop_workers(const std::string& why) {
  const double grace = plan_.grace_period_s;
  const long long kill_at = std::llround(unix_seconds_now() + grace);
  say(fmt::format("stopping the workers of {}: {}waiting up to {} for them to exit (SIGKILL at {} UTC)", node_name(),
                  why.empty() ? "" : why + "; ", format_seconds(grace), format_utc(kill_at, "%H:%M:%S")));
  supervisor_->stop_workers_on_request();
}

// This node lost the server (`silent`: by the SilenceRule; the connection may come back). It says so to
// the server first, so that after a blip the others end for this reason and not for what its stopped
// workers do next (a trainer's checkpoint exit 75 on every node), and keeps the connection until the server
// has it (RendezvousLink::leave_over_silence).
void NodeAgent::server_lost(const std::string& what, bool silent) {
  std::string server = fmt::format("the rendezvous server at {} ({})", link_->client().endpoint(),
                                   plan_.dynamic ? "the --rdzv-endpoint host" : "node 0");
  rdzv::NodeFailure cause;
  cause.round = std::max(round_, 0);
  cause.node_rank = 0;
  cause.node = server;
  cause.host = plan_.rdzv_host;
  cause.node_lost = true;
  cause.exit_code = kNodeLostExitCode;
  cause.outcome = what;
  if (silent)
    link_->leave_over_silence(rdzv::leave_message(kNodeLostExitCode, fmt::format("lost {}: it {}", server, what)));
  end_job(kNodeLostExitCode, fmt::format("{} {}", server, what), cause, false);
}

void NodeAgent::refused_by_token(const std::string& what) {
  end_job(
      exit_code::kUsage,
      fmt::format("the rendezvous server at {} {}. Every node needs the same token (this node's: {}; "
                  "docs/multinode.md#the-rendezvous-token)",
                  link_->client().endpoint(), what, outside_.token.set() ? "from " + outside_.token.source : "none"),
      std::nullopt, true);
}

void NodeAgent::check_client() {
  if (ending_) return;
  const RendezvousClient& client = link_->client();
  if (client.state() == RendezvousClient::State::kUnreachable) {
    end_job(kNodeLostExitCode,
            fmt::format(
                "could not reach the rendezvous server at {} within launch.join_timeout ({}): {}. Is `mgtrain launch` "
                "running on {} with the same {}? Raise --join-timeout if it starts later.",
                client.endpoint(), format_seconds(plan_.join_timeout_s), client.problem(),
                plan_.dynamic ? "the endpoint's host" : "node 0",
                plan_.dynamic ? "--rdzv-endpoint" : "--master-addr/--master-port"),
            std::nullopt, false);
  } else if (client.state() == RendezvousClient::State::kLost && !supervisor_->policy().finished()) {
    // The server dropped this agent's authenticated join: its token is not this node's.
    if (round_ < 0 && outside_.token.set() && !client.authenticated()) return refused_by_token(client.problem());
    server_lost(client.problem(), false);
  }
}

NodeAgentResult run_node_agent(const LaunchPlan& plan, const LoadedConfig& loaded, const EnvMap& environment,
                               const NodeAgentOutside& outside, PortProbe& ports) {
  log::ScopedOutput output(outside.stdout_fd, outside.stderr_fd);
  const auto now = NodeAgent::Clock::now();
  const std::string agent_id = fmt::format("{}:{}", plan.hostname, getpid());
  std::string connect_host;
  Fd listener = host_rendezvous(plan, connect_host);

  NodeAgent agent(plan, loaded, outside);
  Supervisor supervisor(plan, environment, "", ports, 0, outside.stdout_fd, outside.stderr_fd);
  if (outside.diagnostics) supervisor.set_diagnostics(*outside.diagnostics);
  std::unique_ptr<RendezvousServer> server;
  if (listener) {
    server = std::make_unique<RendezvousServer>(
        std::move(listener), rounds_settings(plan, agent_id), ports,
        [&agent](const std::string& line) { agent.say(line); }, now, outside.token);
    log::info("hosting the rendezvous on port {} for {} node{}", plan.rdzv_port, nnodes_text(plan),
              plan.max_nodes == 1 ? "" : "s");
  }
  auto client = std::make_unique<RendezvousClient>(connect_host, plan.rdzv_port,
                                                   now + steady_seconds(plan.join_timeout_s), now, outside.token);
  announce_authentication(plan, connect_host, outside.token);
  if (!server) {
    log::info(
        "joining the rendezvous at {} as {}", client->endpoint(),
        plan.dynamic ? "a node (rank assigned on arrival)" : fmt::format("node {} of {}", plan.node_rank, plan.nnodes));
  }
  agent.attach(supervisor, std::move(server), std::move(client), agent_id);
  supervisor.set_coordinator(&agent);
  supervisor.add_participant(agent);
  std::optional<SnapshotReplication> replication;
  if (loaded.config.launch.snapshot_replicas) {
    replication.emplace(outside.token, supervisor.snapshot_stores(), plan.builtin_trainer,
                        [&agent](const std::string& line) { agent.say(line); });
    agent.set_replication(&*replication);
    supervisor.add_participant(*replication);
  }
  std::shared_ptr<void> monitoring = outside.monitoring ? outside.monitoring(supervisor, agent) : nullptr;
  SupervisionResult result = supervisor.run();
  monitoring.reset();
  if (replication) {
    supervisor.remove_participant(*replication);
    if (const std::string line = replication->summary(); !line.empty()) agent.say(line);
  }
  agent.set_replication(nullptr);
  supervisor.remove_participant(agent);
  supervisor.console().flush();
  return agent.result(result);
}

}  // namespace mgtrain
