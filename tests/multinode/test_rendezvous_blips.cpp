// Blips stay blips (docs/multinode.md, "What a blip is"), with made-up times: a node is lost only after
// launch.node_timeout of silence beyond the moment its next heartbeat was due (SilenceRule), and a job
// ended by a lost node ends on every node with the lost node's exit code and reason, whatever the
// stopped workers exit with.
#include <catch2/catch.hpp>

#include <chrono>

#include "multinode/rendezvous_rounds.hpp"

#include "rounds_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::rdzv;
using namespace mgtrain::rdzv::testing;
using namespace std::chrono_literals;

namespace {

// Node timeout 9 s, heartbeats every 3 s (the most launch_plan allows: node_timeout / 3): a node heard
// at T is lost at T + 12 s; counted from the last heartbeat alone it would be lost at T + 9 s.
RoundsSettings blip_settings(int nodes) {
  RoundsSettings settings = static_settings(nodes);
  settings.node_timeout_s = 9;
  settings.heartbeat_interval_s = 3;
  return settings;
}

// Node 0 (connection 1) beats every second from `from` to `to`; the server's clock follows.
void node0_beats(RendezvousRounds& rounds, SteadyTime from, SteadyTime to) {
  for (SteadyTime at = from; at <= to; at += 1s) {
    rounds.on_message(1, heartbeat_message(), at);
    rounds.on_time(at);
  }
}

}  // namespace

TEST_CASE("SilenceRule: lost at heartbeat interval + node timeout after the last word, and says so with numbers",
          "[rdzv][blips]") {
  const SilenceRule rule{5, 10};
  CHECK(rule.limit_s() == 15);
  CHECK(rule.lost_at(t0 + 2s) == t0 + 17s);
  CHECK_FALSE(rule.lost(t0, t0 + 5s + 7s));  // 0.7 x node timeout beyond the due heartbeat
  CHECK_FALSE(rule.lost(t0, t0 + 14999ms));
  CHECK(rule.lost(t0, t0 + 15s));  // 1.0 x
  CHECK(rule.describe(t0, t0 + 7200ms) ==
        "sent nothing for 7.2 s; a heartbeat was due every 5 s; launch.node_timeout 10 s");
}

TEST_CASE("a node silent 0.7 x node_timeout beyond its due heartbeat is kept, 1.0 x beyond it is lost",
          "[rdzv][blips]") {
  FakeOutbox out;
  RendezvousRounds rounds(blip_settings(2), out, t0);
  two_nodes_join(rounds, t0);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  // Node 1 is silent from 0 s; its heartbeat was due at 3 s; 0.7 x 9 s beyond that is 9.3 s (the old rule,
  // counting from the last heartbeat, lost it at 9 s).
  node0_beats(rounds, t0 + 1s, t0 + 9s);
  rounds.on_time(t0 + 9300ms);
  CHECK(rounds.phase() == RendezvousRounds::Phase::kRunning);
  rounds.on_message(2, heartbeat_message(), t0 + 9300ms);  // the link is back: a blip, nothing happened
  REQUIRE(rounds.next_deadline());
  CHECK(rounds.phase() == RendezvousRounds::Phase::kRunning);
  CHECK(out.to(1, MessageType::kStop).empty());
  CHECK(out.to(2, MessageType::kStop).empty());
  // Silent again from 9.3 s: kept until 9.3 + 3 + 9 = 21.3 s, lost then.
  node0_beats(rounds, t0 + 10s, t0 + 21s);
  CHECK(rounds.phase() == RendezvousRounds::Phase::kRunning);
  REQUIRE(rounds.next_deadline());
  CHECK(*rounds.next_deadline() <= t0 + 21300ms);
  rounds.on_time(t0 + 21300ms);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kStopping);
  CHECK(out.last(1, MessageType::kStop).text("reason") ==
        "node 1 (hostB, 10.77.0.2): sent nothing for 12 s; a heartbeat was due every 3 s; launch.node_timeout 9 s");
}

TEST_CASE("a lost node ends the job on every node with 69 and its reason, though the stopped workers exited 75",
          "[rdzv][blips]") {
  FakeOutbox out;
  RendezvousRounds rounds(blip_settings(2), out, t0);
  two_nodes_join(rounds, t0);
  node0_beats(rounds, t0 + 1s, t0 + 12s);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kStopping);
  const std::string reason = out.last(1, MessageType::kStop).text("reason");
  // Node 0's workers, told to stop, save a checkpoint and exit 75 (the built-in trainer on SIGTERM).
  rounds.on_message(1, workers_ended_message(0, kEndedCheckpoint, 75), t0 + 13s);
  REQUIRE(rounds.finished());
  CHECK(*rounds.final_exit_code() == kNodeLostExitCode);
  Message finish = out.last(1, MessageType::kFinish);
  CHECK(finish.integer("exit_code") == kNodeLostExitCode);
  CHECK_THAT(finish.text("text"), Catch::StartsWith(reason));
  NodeFailure cause = NodeFailure::read_from(finish, "cause.");
  CHECK(cause.node_lost);
  CHECK(cause.node_rank == 1);
  CHECK(cause.exit_code == kNodeLostExitCode);
}

TEST_CASE("a node that lost the server leaves with 69 before its workers' checkpoint exits reach the server",
          "[rdzv][blips]") {
  // Three nodes; node 1's agent lost the server (its own SilenceRule) and stopped its workers, whose
  // checkpoint stop made every worker exit 75 (the trainer agrees on the stop step). Nodes 0 and 2 report
  // that first; then node 1's connection comes back with its leave, then its own workers' end.
  FakeOutbox out;
  RendezvousRounds rounds(blip_settings(3), out, t0);
  for (int id = 1; id <= 3; ++id) rounds.on_connect(id, "10.77.0." + std::to_string(id), t0);
  for (int rank = 0; rank < 3; ++rank) {
    JoinRequest join = join_request(rank, std::string("host") + static_cast<char>('A' + rank));
    join.nnodes = "3";
    rounds.on_message(rank + 1, join.to_message(), t0);
  }
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  rounds.on_message(1, workers_ended_message(0, kEndedCheckpoint, 75), t0 + 5s);
  rounds.on_message(3, workers_ended_message(0, kEndedCheckpoint, 75), t0 + 5s);
  CHECK_FALSE(rounds.finished());
  const std::string why =
      "lost the rendezvous server at 10.77.0.1:29500 (node 0): it sent nothing for 12 s; a heartbeat was due every "
      "3 s; launch.node_timeout 9 s";
  rounds.on_message(2, leave_message(kNodeLostExitCode, why), t0 + 6s);
  rounds.on_message(2, workers_ended_message(0, kEndedCheckpoint, 75), t0 + 6s);  // ignored: it left
  REQUIRE(rounds.finished());
  CHECK(*rounds.final_exit_code() == kNodeLostExitCode);
  for (ConnectionId id : {1, 3}) {
    Message finish = out.last(id, MessageType::kFinish);
    CHECK(finish.integer("exit_code") == kNodeLostExitCode);
    CHECK_THAT(finish.text("text"), Catch::StartsWith("node 1 (hostB, 10.77.0.2): " + why));
    CHECK_THAT(finish.text("text"), !Catch::Contains("stopped on request"));
  }
}
