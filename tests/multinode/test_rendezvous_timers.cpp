// The rendezvous server's bookkeeping for many agents (docs/PERFORMANCE.md, "Rendezvous at scale"):
// RecencyList, the heartbeat bursts and silent nodes found through it, the next deadline, and the
// counter that tells when every member's workers have ended.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "multinode/recency_list.hpp"
#include "multinode/rendezvous_rounds.hpp"

#include "rounds_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::rdzv;
using namespace mgtrain::rdzv::testing;
using namespace std::chrono_literals;

namespace {

std::vector<ConnectionId> heartbeat_receivers(const FakeOutbox& out) {
  std::vector<ConnectionId> ids;
  for (const auto& [id, message] : out.sent) {
    if (message.type == MessageType::kHeartbeat) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

TEST_CASE("RecencyList keeps the oldest first, also for a time older than the newest", "[rdzv][timers]") {
  RecencyList list;
  CHECK_FALSE(list.oldest());
  list.touch(1, t0 + 1s);
  list.touch(2, t0 + 2s);
  list.touch(3, t0 + 3s);
  list.touch(1, t0 + 4s);  // moves to the back
  CHECK(*list.oldest() == t0 + 2s);
  CHECK(list.up_to(t0 + 3s) == std::vector<ConnectionId>{2, 3});
  list.touch(4, t0 + 2500ms);  // out of order: goes between 2 and 3
  CHECK(list.up_to(t0 + 3s) == std::vector<ConnectionId>{2, 4, 3});
  list.remove(2);
  list.remove(42);  // unknown: nothing happens
  CHECK(*list.oldest() == t0 + 2500ms);
  CHECK(list.size() == 3);
  CHECK(list.up_to(t0 + 10s) == std::vector<ConnectionId>{4, 3, 1});
  list.clear();
  CHECK_FALSE(list.oldest());
}

TEST_CASE("heartbeats go out in one burst to every node not spoken to for half an interval", "[rdzv][timers]") {
  FakeOutbox out;
  RoundsSettings settings = static_settings(3);
  settings.heartbeat_interval_s = 2;
  settings.node_timeout_s = 10;
  RendezvousRounds rounds(settings, out, t0);
  for (int id = 1; id <= 3; ++id) rounds.on_connect(id, "10.77.0." + std::to_string(id), t0);
  rounds.on_message(1, join_request(0, "hostA").to_message(), t0);
  rounds.on_message(2, join_request(1, "hostB").to_message(), t0);
  // Node 3 joins (and gets the assignment) at 1.5 s: the server spoke to it less than an interval ago.
  rounds.on_message(3, join_request(2, "hostC").to_message(), t0 + 1500ms);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  REQUIRE(rounds.next_deadline());
  CHECK(*rounds.next_deadline() == t0 + 1500ms + 2s);  // every node got its assignment at 1.5 s
  out.clear();
  rounds.on_time(t0 + 3s);
  CHECK(heartbeat_receivers(out).empty());
  rounds.on_time(t0 + 3500ms);
  CHECK(heartbeat_receivers(out) == std::vector<ConnectionId>{1, 2, 3});
  out.clear();
  rounds.on_time(t0 + 4s);  // nobody is due again yet
  CHECK(heartbeat_receivers(out).empty());
  CHECK(*rounds.next_deadline() == t0 + 5500ms);
}

TEST_CASE("a burst includes nodes half an interval quiet, not those spoken to just now", "[rdzv][timers]") {
  FakeOutbox out;
  RoundsSettings settings = static_settings(2);
  settings.heartbeat_interval_s = 2;
  settings.node_timeout_s = 10;
  RendezvousRounds rounds(settings, out, t0);
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_connect(2, "10.77.0.2", t0 + 1500ms);  // connected later: the server has sent it nothing yet
  out.clear();
  rounds.on_time(t0 + 2s);  // connection 1 is due; connection 2 was "spoken to" 0.5 s ago
  CHECK(heartbeat_receivers(out) == std::vector<ConnectionId>{1});
  out.clear();
  rounds.on_time(t0 + 3500ms);  // connection 2 is due; connection 1 (1.5 s quiet) goes along
  CHECK(heartbeat_receivers(out) == std::vector<ConnectionId>{1, 2});
}

TEST_CASE("nodes that fell silent together are lost in connection order, the deadline follows the oldest",
          "[rdzv][timers]") {
  FakeOutbox out;
  RoundsSettings settings = static_settings(3);
  settings.node_timeout_s = 5;
  RendezvousRounds rounds(settings, out, t0);
  for (int id = 1; id <= 3; ++id) rounds.on_connect(id, "10.77.0." + std::to_string(id), t0);
  rounds.on_message(3, join_request(2, "hostC").to_message(), t0 + 1s);
  rounds.on_message(2, join_request(1, "hostB").to_message(), t0 + 1s);
  rounds.on_message(1, join_request(0, "hostA").to_message(), t0 + 2s);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  for (int second = 3; second <= 7; ++second)
    rounds.on_message(1, heartbeat_message(), t0 + std::chrono::seconds(second));
  REQUIRE(rounds.next_deadline());
  CHECK(*rounds.next_deadline() <= t0 + 7s);  // 2 and 3 were last heard at 1 s; due at 2 s, lost 5 s later
  rounds.on_time(t0 + 7s);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kStopping);
  // The root cause is the first one lost: connection 2 (node 1), although node 2 was heard first in time order.
  CHECK_THAT(out.last(1, MessageType::kStop).text("reason"),
             Catch::StartsWith("node 1 (hostB, 10.77.0.2): sent nothing"));
  CHECK(std::find(out.dropped.begin(), out.dropped.end(), 3) != out.dropped.end());
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 8s);
  CHECK(rounds.finished());
}

TEST_CASE("with many nodes the round ends only at the last member's end, lost members included", "[rdzv][timers]") {
  constexpr int kNodes = 500;
  FakeOutbox out;
  RoundsSettings settings = static_settings(kNodes);
  settings.node_timeout_s = 1000;
  RendezvousRounds rounds(settings, out, t0);
  for (int rank = 0; rank < kNodes; ++rank) {
    rounds.on_connect(rank + 1, "10.0.0.1", t0);
    JoinRequest join = join_request(rank, "host" + std::to_string(rank));
    join.nnodes = std::to_string(kNodes);
    rounds.on_message(rank + 1, join.to_message(), t0);
  }
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  rounds.on_message(5, workers_failed_message(worker_failure(0, 8, 3)), t0 + 1s);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kStopping);
  rounds.on_message(5, workers_ended_message(0, kEndedFailed, 3), t0 + 1s);
  for (int id = 1; id <= kNodes; ++id) {
    if (id == 5 || id == 100 || id == 300) continue;
    rounds.on_message(id, workers_ended_message(0, kEndedStopped, 0), t0 + 2s);
    rounds.on_message(id, workers_ended_message(0, kEndedStopped, 0), t0 + 2s);  // a repeat counts once
  }
  CHECK_FALSE(rounds.finished());
  rounds.on_disconnect(100, "closed the connection", t0 + 3s);  // a member lost while stopping
  CHECK_FALSE(rounds.finished());
  rounds.on_message(300, workers_ended_message(0, kEndedStopped, 0), t0 + 4s);
  REQUIRE(rounds.finished());
  CHECK(*rounds.final_exit_code() == 3);
  CHECK(out.last(1, MessageType::kFinish).integer("exit_code") == 3);
}
