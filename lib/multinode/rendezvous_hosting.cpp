// Hosting the rendezvous: the listening socket, the server's settings, leaving on a signal (rendezvous_hosting.hpp).
#include "multinode/rendezvous_hosting.hpp"

#include <cerrno>
#include <chrono>

#include <fmt/format.h>

#include "multinode/job_fingerprint.hpp"
#include "multinode/tcp_socket.hpp"
#include "supervise/supervision_policy.hpp"
#include "util/build_info.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/log.hpp"

namespace mgtrain {

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

void leave_on_signal(const LaunchPlan& plan, RendezvousServer* server, RendezvousClient& client, int signal) {
  const std::string why = "was stopped by " + signal_name(signal);
  if (server) {
    std::string who = plan.dynamic ? fmt::format("the agent on {}, which hosts the rendezvous,", plan.hostname)
                                   : fmt::format("node 0 ({}), which hosts the rendezvous,", plan.hostname);
    server->abandon(kNodeLostExitCode,
                    fmt::format("{} {} before the job started; start `mgtrain launch` on every node again", who, why),
                    std::chrono::steady_clock::now());
  }
  if (client.state() == RendezvousClient::State::kConnected) {
    client.send(rdzv::leave_message(stopped_exit_code(signal), why));
  } else {
    client.close();
  }
}

}  // namespace mgtrain
