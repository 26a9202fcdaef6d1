// Elastic scale-up in the rendezvous round state machine (fake outbox, made-up times): a node that
// arrives while a dynamic round runs below MAX restarts the round without using a restart; at MAX it
// waits as a standby; failures and finished workers during the scale-up's stop keep their meaning.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "multinode/rendezvous_rounds.hpp"
#include "util/exit_status.hpp"

#include "rounds_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::rdzv;
using namespace mgtrain::rdzv::testing;
using namespace std::chrono_literals;

namespace {

using Phase = RendezvousRounds::Phase;
using Arrival = RendezvousRounds::Arrival;

// The hosting agent (connection 1, hostA) alone in round 0 of a `min:max` job: joined at t0, the round
// starts after the last call (2 s), or at once when max is 1.
void host_runs_alone(RendezvousRounds& rounds, const std::string& nnodes) {
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, dynamic_join("hostA", nnodes).to_message(), t0);
  rounds.on_time(t0 + 2s);
  REQUIRE(rounds.phase() == Phase::kRunning);
  REQUIRE(rounds.round() == 0);
}

void node_b_arrives(RendezvousRounds& rounds, const std::string& nnodes, SteadyTime at) {
  rounds.on_connect(2, "10.77.0.2", at);
  rounds.on_message(2, dynamic_join("hostB", nnodes).to_message(), at);
}

}  // namespace

TEST_CASE("scale-up decision: below MAX a running round restarts, at MAX the newcomer is a standby",
          "[rdzv][rounds][scale-up]") {
  CHECK(RendezvousRounds::arrival_during(Phase::kRunning, 1, 2) == Arrival::kScaleUp);
  CHECK(RendezvousRounds::arrival_during(Phase::kRunning, 3, 4) == Arrival::kScaleUp);
  CHECK(RendezvousRounds::arrival_during(Phase::kRunning, 2, 2) == Arrival::kStandby);
  CHECK(RendezvousRounds::arrival_during(Phase::kRunning, 4, 4) == Arrival::kStandby);
  // a round that stops already (a failure, or another scale-up) takes the newcomer in the round that follows
  CHECK(RendezvousRounds::arrival_during(Phase::kStopping, 1, 2) == Arrival::kNextRound);
  CHECK(RendezvousRounds::arrival_during(Phase::kStopping, 2, 2) == Arrival::kNextRound);
}

TEST_CASE("scale-up: a node arriving below MAX stops the round and a larger one starts, without using a restart",
          "[rdzv][rounds][scale-up]") {
  FakeOutbox out;
  RendezvousRounds rounds(dynamic_settings(1, 2, 0), out, t0);  // --max-restarts 0: a failure would end the job
  host_runs_alone(rounds, "1:2");
  CHECK(Assignment::from(out.last(1, MessageType::kAssign)).world_size() == 2);
  node_b_arrives(rounds, "1:2", t0 + 5s);
  CHECK(rounds.phase() == Phase::kStopping);
  CHECK(rounds.scaling_up());
  Message regroup = out.last(1, MessageType::kRegroup);
  CHECK(regroup.integer("round") == 0);
  CHECK(regroup.integer("nodes") == 2);
  CHECK(
      regroup.text("reason") ==
      "a new node (hostB, 10.77.0.2) arrived; restarting the round with 2 nodes (elastic scale-up, not counted against "
      "--max-restarts)");
  CHECK(out.to(1, MessageType::kStop).empty());  // not a failure's stop
  CHECK_THAT(out.last(2, MessageType::kWait).text("text"),
             Catch::Contains("round 0 runs with 1 node of at most 2; it restarts to admit this node"));
  CHECK(out.to(2, MessageType::kAssign).empty());
  // node 0's workers stopped (SIGTERM): the round with both nodes starts at once (MAX), restart count 0
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 6s);
  REQUIRE(rounds.phase() == Phase::kRunning);
  CHECK_FALSE(rounds.scaling_up());
  CHECK(rounds.round() == 1);
  CHECK(rounds.restarts_used() == 0);
  Assignment a = Assignment::from(out.last(1, MessageType::kAssign));
  Assignment b = Assignment::from(out.last(2, MessageType::kAssign));
  CHECK(a.round == 1);
  CHECK(a.restart_count == 0);
  CHECK(a.node_rank == 0);
  CHECK(b.node_rank == 1);
  CHECK(b.world_size() == 4);
  CHECK(b.first_rank(1) == 2);
  CHECK(b.master_port != Assignment::from(out.to(1, MessageType::kAssign).front()).master_port);  // a fresh store
  // and the job ends as usual
  rounds.on_message(1, workers_ended_message(1, kEndedSuccess, 0), t0 + 7s);
  rounds.on_message(2, workers_ended_message(1, kEndedSuccess, 0), t0 + 7s);
  REQUIRE(rounds.finished());
  CHECK(*rounds.final_exit_code() == 0);
}

TEST_CASE("scale-up: at MAX a newcomer waits as a standby and the round goes on, until a lost node lets it in",
          "[rdzv][rounds][scale-up]") {
  FakeOutbox out;
  RendezvousRounds rounds(dynamic_settings(1, 2, 1), out, t0);
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, dynamic_join("hostA", "1:2").to_message(), t0);
  node_b_arrives(rounds, "1:2", t0);
  REQUIRE(rounds.phase() == Phase::kRunning);  // MAX: no last call
  rounds.on_connect(3, "10.77.0.3", t0 + 1s);
  rounds.on_message(3, dynamic_join("hostC", "1:2").to_message(), t0 + 1s);
  CHECK(rounds.phase() == Phase::kRunning);
  CHECK(rounds.round() == 0);
  CHECK_FALSE(rounds.scaling_up());
  CHECK(out.to(1, MessageType::kRegroup).empty());
  CHECK(out.to(2, MessageType::kRegroup).empty());
  CHECK(out.to(1, MessageType::kStop).empty());
  CHECK_THAT(out.last(3, MessageType::kWait).text("text"),
             Catch::Contains("round 0 runs with the maximum of 2 nodes; this node waits as a standby"));
  // node 1 is lost: the restart (counted) takes the standby
  rounds.on_disconnect(2, "closed the connection", t0 + 2s);
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 3s);
  REQUIRE(rounds.phase() == Phase::kRunning);
  CHECK(rounds.restarts_used() == 1);
  Assignment c = Assignment::from(out.last(3, MessageType::kAssign));
  CHECK(c.round == 1);
  CHECK(c.restart_count == 1);
  CHECK(c.node_rank == 1);
  CHECK(c.nnodes() == 2);
}

TEST_CASE("scale-up: below MAX the larger round still waits the last call for more nodes", "[rdzv][rounds][scale-up]") {
  FakeOutbox out;
  RendezvousRounds rounds(dynamic_settings(1, 3, 0), out, t0);
  host_runs_alone(rounds, "1:3");
  node_b_arrives(rounds, "1:3", t0 + 5s);
  CHECK(out.last(1, MessageType::kRegroup).integer("nodes") == 2);
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 6s);
  CHECK(rounds.phase() == Phase::kGathering);
  CHECK_THAT(out.last(2, MessageType::kWait).text("text"),
             Catch::Contains("restarts with 2 nodes after the last call (2 s)"));
  REQUIRE(rounds.next_deadline());
  CHECK(*rounds.next_deadline() <= t0 + 8s);
  rounds.on_time(t0 + 8s);
  REQUIRE(rounds.phase() == Phase::kRunning);
  CHECK(Assignment::from(out.last(2, MessageType::kAssign)).nnodes() == 2);
  CHECK(rounds.restarts_used() == 0);
}

TEST_CASE("scale-up: a worker that failed by itself during the stop is a failure, counted against --max-restarts",
          "[rdzv][rounds][scale-up]") {
  FakeOutbox out;
  RendezvousRounds rounds(dynamic_settings(1, 2, 0), out, t0);
  host_runs_alone(rounds, "1:2");
  node_b_arrives(rounds, "1:2", t0 + 5s);
  NodeFailure failure = worker_failure(0, 1, 3);
  failure.host = "hostA";
  rounds.on_message(1, workers_failed_message(failure), t0 + 5s);
  rounds.on_message(1, workers_ended_message(0, kEndedFailed, 3), t0 + 6s);
  REQUIRE(rounds.finished());
  Message finish = out.last(2, MessageType::kFinish);
  CHECK(finish.integer("exit_code") == 3);
  CHECK_THAT(finish.text("text"), Catch::Contains("no restart left (launch.max_restarts 0)"));
  CHECK(finish.flag("has_cause"));
}

TEST_CASE("scale-up: workers that finished before the stop reached them end the job instead of running again",
          "[rdzv][rounds][scale-up]") {
  FakeOutbox out;
  RendezvousRounds rounds(dynamic_settings(1, 2, 0), out, t0);
  host_runs_alone(rounds, "1:2");
  node_b_arrives(rounds, "1:2", t0 + 5s);
  rounds.on_message(1, workers_ended_message(0, kEndedSuccess, 0), t0 + 5s);
  REQUIRE(rounds.finished());
  CHECK(*rounds.final_exit_code() == 0);
  CHECK(out.last(2, MessageType::kFinish).integer("exit_code") == 0);  // the waiting node hears it too
  CHECK(out.to(2, MessageType::kAssign).empty());
}
