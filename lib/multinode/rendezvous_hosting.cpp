// The node agent's side of the rendezvous: hosting it, the link to it, the plan of a round (rendezvous_hosting.hpp).
#include "multinode/rendezvous_hosting.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "multinode/job_fingerprint.hpp"
#include "process/event_loop.hpp"
#include "supervise/supervision_policy.hpp"
#include "util/build_info.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/log.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"
#include "wire/tcp_socket.hpp"

namespace mgtrain {
namespace {

// After the job is decided: how long queued messages may take to leave before the agent exits; after a leave over
// the server's silence, how often the agent checks whether the server has it.
constexpr auto kFlushLinger = std::chrono::seconds(2);
constexpr auto kAckPoll = std::chrono::milliseconds(100);

}  // namespace

std::string nnodes_text(const LaunchPlan& plan) {
  if (plan.min_nodes == plan.max_nodes) return std::to_string(plan.max_nodes);
  return fmt::format("{}:{}", plan.min_nodes, plan.max_nodes);
}

Fd host_rendezvous(const LaunchPlan& plan, std::string& connect_host) {
  if (!plan.dynamic) {
    connect_host = plan.node_rank == 0 ? "127.0.0.1" : plan.rdzv_host;
    if (plan.node_rank != 0) return Fd();
    Fd listener = listen_on_any(plan.rdzv_port);
    if (listener) return listener;
    if (errno == EADDRINUSE) {
      throw UsageError(
          fmt::format("launch.master_port {} is already in use on this machine (another job, or a leftover "
                      "process?): node 0 hosts mgtrain's rendezvous there; choose another --master-port and "
                      "pass it to every node",
                      plan.rdzv_port));
    }
    if (errno == EACCES) {
      throw UsageError(fmt::format(
          "launch.master_port {} may not be used by this user (ports below 1024 need privileges)", plan.rdzv_port));
    }
    throw SystemError(fmt::format("listening on port {} for the rendezvous", plan.rdzv_port), errno);
  }
  connect_host = plan.rdzv_host;
  std::string error;
  std::vector<SocketAddress> addresses = resolve_tcp(plan.rdzv_host, plan.rdzv_port, error);
  for (const SocketAddress& address : addresses) {
    Fd listener = listen_on(address);
    if (listener) {
      connect_host = address.host_text();
      return listener;
    }
    if (errno == EACCES) {
      throw UsageError(
          fmt::format("launch.rdzv_endpoint port {} may not be used by this user (ports below 1024 need "
                      "privileges)",
                      plan.rdzv_port));
    }
  }
  return Fd();  // not resolvable here either: the client retries until the join timeout and says why
}

rdzv::RoundsSettings rounds_settings(const LaunchPlan& plan, const std::string& host_agent_id) {
  rdzv::RoundsSettings settings;
  settings.dynamic = plan.dynamic;
  settings.min_nodes = plan.min_nodes;
  settings.max_nodes = plan.max_nodes;
  settings.join_timeout_s = plan.join_timeout_s;
  settings.last_call_timeout_s = plan.last_call_timeout_s;
  settings.node_timeout_s = plan.node_timeout_s;
  settings.heartbeat_interval_s = plan.node_heartbeat_interval_s;
  settings.diagnose_timeout_s = plan.diagnose_timeout_s;
  settings.max_restarts = plan.max_restarts;
  settings.personality = plan.personality;
  settings.master_addr = plan.dynamic ? plan.rdzv_host : plan.master_addr;
  settings.host_agent_id = host_agent_id;
  return settings;
}

LaunchPlan plan_for_round(LaunchPlan plan, const rdzv::Assignment& assignment) {
  plan.node_rank = assignment.node_rank;
  plan.nnodes = assignment.nnodes();
  plan.world_size = assignment.world_size();
  plan.first_rank = assignment.first_rank(assignment.node_rank);
  plan.role_first_rank = assignment.role_first_rank;
  plan.role_world_size = assignment.role_world_size;
  plan.workers_sharing_cpus = assignment.workers_sharing_cpus;
  plan.restart_count = assignment.restart_count;
  plan.master_addr = assignment.master_addr;
  plan.master_port = assignment.master_port;
  plan.max_restarts = assignment.max_restarts;
  return plan;
}

std::string round_line(const LaunchPlan& plan, int round, const std::string& node_name) {
  auto range = [&](int first) {
    return plan.nproc == 1 ? fmt::format("rank {}", first) : fmt::format("ranks {}-{}", first, first + plan.nproc - 1);
  };
  std::string ranks = fmt::format("{} of {}", range(plan.global_rank(0)), plan.world_size);
  if (plan.role_size() != plan.world_size) {
    ranks += fmt::format(", role {} {} of {}", plan.role, range(plan.role_rank(0)), plan.role_size());
  }
  return fmt::format("round {}: {} of {} ({}), workers' store {}:{}", round, node_name, plan.nnodes, ranks,
                     plan.master_addr, plan.master_port);
}

rdzv::JoinRequest join_request_for(const LaunchPlan& plan, const LoadedConfig& loaded, const std::string& agent_id) {
  rdzv::JoinRequest join;
  join.version = build_info::kVersion;
  join.node_rank = plan.dynamic ? -1 : plan.node_rank;
  join.hostname = plan.hostname;
  join.cpu_sharing = plan.cpus.sharing_key();
  join.agent_id = agent_id;
  join.nproc = plan.nproc;
  join.role = plan.role;
  join.nnodes = nnodes_text(plan);
  join.run_id = plan.run_id;
  join.run_id_generated = loaded.origin_of("launch.run_id") == "generated";
  join.max_restarts = plan.max_restarts;
  join.allow_uneven_nproc = plan.allow_uneven_nproc;
  const JobFingerprint fingerprint = job_fingerprint(loaded);
  join.config_hash = fingerprint.hash;
  join.config_lines = fingerprint.lines;
  return join;
}

void announce_authentication(const LaunchPlan& plan, const std::string& connect_host,
                             const rdzv::RendezvousToken& token) {
  if (token.set()) {
    log::info("the rendezvous is authenticated with the token from {}", token.source);
  } else if (plan.max_nodes > 1 && !is_loopback_host(connect_host)) {
    log::warn(
        "the rendezvous on port {} is not authenticated: anyone who can reach it can join or end this job; set the "
        "same MGTRAIN_RDZV_TOKEN or launch.rdzv_token_file on every node (docs/multinode.md#the-rendezvous-token)",
        plan.rdzv_port);
  }
}

// ---- the link ----------------------------------------------------------------------------------

RendezvousLink::RendezvousLink(std::unique_ptr<RendezvousServer> server, std::unique_ptr<RendezvousClient> client,
                               rdzv::SilenceRule silence, std::function<void(const std::string&)> say)
    : server_(std::move(server)), client_(std::move(client)), silence_(silence), say_(std::move(say)) {}

void RendezvousLink::add_fds(std::vector<pollfd>& fds) {
  server_fd_ = -1;
  if (server_) {
    server_->add_fds(fds);  // exactly one: its epoll set
    server_fd_ = fds.back().fd;
  }
  client_->add_fds(fds);
}

bool RendezvousLink::serve(const pollfd& ready, Clock::time_point now) {
  if (!server_ || ready.fd != server_fd_) return false;
  server_->on_ready(ready, now);
  return true;
}

std::optional<RendezvousLink::Clock::time_point> RendezvousLink::next_deadline(bool finished, bool watching) const {
  std::optional<Clock::time_point> next;
  if (server_) keep_earliest(next, server_->next_deadline());
  keep_earliest(next, client_->next_deadline());
  if (client_->state() == RendezvousClient::State::kConnected) {
    if (finished) {
      keep_earliest(next, finished_at_ ? *finished_at_ + linger() : Clock::now());
      if (finished_at_ && left_after_silence_) keep_earliest(next, Clock::now() + kAckPoll);
    } else {
      keep_earliest(next, client_->last_sent() + steady_seconds(silence_.heartbeat_interval_s));
      if (watching) keep_earliest(next, silence_.lost_at(client_->last_heard()));
    }
  }
  return next;
}

std::optional<std::string> RendezvousLink::on_time(Clock::time_point now, bool finished, bool watching) {
  if (server_) server_->on_time(now);
  client_->on_time(now);
  if (auto notice = client_->take_unresolved_notice(now); notice && watching) say_(*notice);
  if (client_->state() != RendezvousClient::State::kConnected) return std::nullopt;
  if (finished) {
    if (!finished_at_) finished_at_ = now;
    bool waiting = left_after_silence_ ? client_->unacknowledged() : client_->has_output();
    if (!waiting || now >= *finished_at_ + linger()) {
      client_->close();
    } else if (left_after_silence_ && !std::exchange(said_linger_, true)) {
      say_("waiting up to " + format_seconds(std::chrono::duration<double>(linger()).count()) +
           " for the server to hear that this node left");
    }
    return std::nullopt;
  }
  if (now - client_->last_sent() >= steady_seconds(silence_.heartbeat_interval_s))
    client_->send(rdzv::heartbeat_message());
  if (watching && silence_.lost(client_->last_heard(), now)) return silence_.describe(client_->last_heard(), now);
  return std::nullopt;
}

void RendezvousLink::answer_heartbeat() {
  if (Clock::now() - client_->last_sent() >= steady_seconds(silence_.heartbeat_interval_s / 2)) {
    client_->send(rdzv::heartbeat_message());
  }
}

void RendezvousLink::leave_over_silence(const rdzv::Message& leave) {
  client_->send(leave);
  left_after_silence_ = true;
}

void RendezvousLink::leave_on_signal(const LaunchPlan& plan, int signal) {
  const std::string why = "was stopped by " + signal_name(signal);
  if (server_) {
    std::string who = plan.dynamic ? fmt::format("the agent on {}, which hosts the rendezvous,", plan.hostname)
                                   : fmt::format("node 0 ({}), which hosts the rendezvous,", plan.hostname);
    server_->abandon(kNodeLostExitCode,
                     fmt::format("{} {} before the job started; start `mgtrain launch` on every node again", who, why),
                     Clock::now());
  }
  if (client_->state() == RendezvousClient::State::kConnected) {
    client_->send(rdzv::leave_message(stopped_exit_code(signal), why));
  } else {
    client_->close();
  }
}

void RendezvousLink::close_now() {
  if (server_) server_->stop_lingering();
  client_->close();
}

bool RendezvousLink::done(Clock::time_point now) const {
  bool client_done = client_->state() != RendezvousClient::State::kConnected &&
                     client_->state() != RendezvousClient::State::kConnecting;
  return client_done && (!server_ || server_->quiescent(now));
}

// After leave_over_silence: the server, by the same rule, decides about this node itself within about a heartbeat
// interval of this node's verdict (their last messages were at most that far apart); after that the leave no
// longer matters.
RendezvousLink::Clock::duration RendezvousLink::linger() const {
  if (!left_after_silence_) return kFlushLinger;
  const double interval = silence_.heartbeat_interval_s;
  const double flush = std::chrono::duration<double>(kFlushLinger).count();
  return steady_seconds(std::min(silence_.node_timeout_s, std::max(2 * interval, flush)));
}

}  // namespace mgtrain
