// Shared by the rendezvous round tests: a fake outbox that records what the state machine orders,
// join requests, settings with short timeouts, and a worker failure as an agent reports it.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "multinode/job_fingerprint.hpp"
#include "multinode/rendezvous_rounds.hpp"
#include "util/exit_status.hpp"

namespace mgtrain::rdzv::testing {

struct FakeOutbox : RoundsOutbox {
  std::vector<std::pair<ConnectionId, Message>> sent;
  std::vector<ConnectionId> closed;
  std::vector<ConnectionId> dropped;  // closed without flushing (dead peers)
  std::vector<std::string> notes;
  int next_port = 40000;

  void send(ConnectionId connection, const Message& message) override { sent.emplace_back(connection, message); }
  void close(ConnectionId connection, bool flush) override {
    closed.push_back(connection);
    if (!flush) dropped.push_back(connection);
  }
  int pick_store_port() override { return next_port++; }
  void note(const std::string& line) override { notes.push_back(line); }

  // Messages of `type` sent to `connection`, oldest first.
  std::vector<Message> to(ConnectionId connection, MessageType type) const {
    std::vector<Message> found;
    for (const auto& [id, message] : sent) {
      if (id == connection && message.type == type) found.push_back(message);
    }
    return found;
  }
  Message last(ConnectionId connection, MessageType type) const {
    auto found = to(connection, type);
    REQUIRE_FALSE(found.empty());
    return found.back();
  }
  void clear() { sent.clear(); }
};

inline const SteadyTime t0{};

inline JoinRequest join_request(int node_rank, const std::string& host, int nproc = 2) {
  static const JobFingerprint fingerprint = job_fingerprint(Config{});
  JoinRequest join;
  join.version = "0.1.0";
  join.node_rank = node_rank;
  join.hostname = host;
  join.agent_id = host + ":100";
  join.nproc = nproc;
  join.nnodes = "2";
  join.run_id = "job";
  join.config_hash = fingerprint.hash;
  join.config_lines = fingerprint.lines;
  return join;
}

inline RoundsSettings static_settings(int nodes = 2, int max_restarts = 0) {
  RoundsSettings settings;
  settings.min_nodes = settings.max_nodes = nodes;
  settings.join_timeout_s = 10;
  settings.node_timeout_s = 3;
  settings.heartbeat_interval_s = 1;
  settings.max_restarts = max_restarts;
  settings.master_addr = "10.77.0.1";
  return settings;
}

inline RoundsSettings dynamic_settings(int min, int max, int max_restarts = 0) {
  RoundsSettings settings = static_settings(max, max_restarts);
  settings.dynamic = true;
  settings.min_nodes = min;
  settings.last_call_timeout_s = 2;
  settings.node_timeout_s = 30;
  settings.host_agent_id = "hostA:100";
  return settings;
}

inline JoinRequest dynamic_join(const std::string& host, const std::string& nnodes = "2:3") {
  JoinRequest join = join_request(-1, host);
  join.nnodes = nnodes;
  return join;
}

// Connections 1 (node 0 over loopback) and 2 (node 1 from 10.77.0.2), both joined.
inline void two_nodes_join(RendezvousRounds& rounds, SteadyTime at, int nproc1 = 2) {
  rounds.on_connect(1, "127.0.0.1", at);
  rounds.on_message(1, join_request(0, "hostA").to_message(), at);
  rounds.on_connect(2, "10.77.0.2", at);
  rounds.on_message(2, join_request(1, "hostB", nproc1).to_message(), at);
}

inline NodeFailure worker_failure(int round, int rank, int code) {
  NodeFailure failure;
  failure.round = round;
  failure.global_rank = rank;
  failure.local_rank = rank % 2;
  failure.exit_code = code;
  failure.outcome = "exit code " + std::to_string(code);
  failure.host = "hostB";
  return failure;
}

}  // namespace mgtrain::rdzv::testing
