// The rendezvous round state machine with a fake outbox and made-up times: static agreement,
// rank layout, join timeout, fate sharing, global restarts, dead nodes, dynamic rounds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "multinode/job_fingerprint.hpp"
#include "multinode/rendezvous_rounds.hpp"
#include "util/exit_status.hpp"
#include "wire/node_status.hpp"

#include "rounds_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::rdzv;
using namespace mgtrain::rdzv::testing;
using namespace std::chrono_literals;

TEST_CASE("static: every node gets its rank range and the workers' store once all have joined", "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2), out, t0);
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, join_request(0, "hostA").to_message(), t0);
  CHECK(rounds.phase() == RendezvousRounds::Phase::kGathering);
  CHECK(out.to(1, MessageType::kAssign).empty());
  rounds.on_connect(2, "10.77.0.2", t0 + 1s);
  rounds.on_message(2, join_request(1, "hostB").to_message(), t0 + 1s);
  CHECK(rounds.phase() == RendezvousRounds::Phase::kRunning);
  Assignment a0 = Assignment::from(out.last(1, MessageType::kAssign));
  Assignment a1 = Assignment::from(out.last(2, MessageType::kAssign));
  CHECK(a0.round == 0);
  CHECK(a0.node_rank == 0);
  CHECK(a1.node_rank == 1);
  CHECK(a1.first_rank(1) == 2);
  CHECK(a1.world_size() == 4);
  CHECK(a1.master_addr == "10.77.0.1");
  CHECK(a1.master_port == 40000);
  CHECK(a0.node_name == "node 0 (hostA)");
  CHECK(a1.node_name == "node 1 (hostB, 10.77.0.2)");
}

TEST_CASE("each node's buddy is the next node of the round, the last node's is node 0, at the address others reach",
          "[rdzv][rounds][replicate]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(3), out, t0);
  const char* addresses[] = {"127.0.0.1", "10.77.0.2", "10.77.0.3"};  // node 0 hosts, and joined over loopback
  for (int node = 0; node < 3; ++node) {
    JoinRequest join = join_request(node, std::string("host") + static_cast<char>('A' + node));
    join.nnodes = "3";
    join.replica_port = 41000 + node;
    rounds.on_connect(node + 1, addresses[node], t0);
    rounds.on_message(node + 1, join.to_message(), t0);
  }
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  const Assignment a0 = Assignment::from(out.last(1, MessageType::kAssign));
  const Assignment a1 = Assignment::from(out.last(2, MessageType::kAssign));
  const Assignment a2 = Assignment::from(out.last(3, MessageType::kAssign));
  CHECK(a0.buddy_host == "10.77.0.2");
  CHECK(a0.buddy_port == 41001);
  CHECK(a0.buddy_name == "node 1 (hostB, 10.77.0.2)");
  CHECK(a1.buddy_host == "10.77.0.3");
  CHECK(a1.buddy_port == 41002);
  CHECK(a2.buddy_host == "10.77.0.1");  // node 0's loopback address is no use to node 2: the store's address is
  CHECK(a2.buddy_port == 41000);
  CHECK(a2.buddy_name == "node 0 (hostA)");
}

TEST_CASE("no buddy for a node alone, nor toward a node that takes no replicas", "[rdzv][rounds][replicate]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2), out, t0);
  JoinRequest join0 = join_request(0, "hostA"), join1 = join_request(1, "hostB");
  join0.replica_port = 41000;  // node 1 takes none (port 0)
  rounds.on_connect(1, "10.77.0.1", t0);
  rounds.on_message(1, join0.to_message(), t0);
  rounds.on_connect(2, "10.77.0.2", t0);
  rounds.on_message(2, join1.to_message(), t0);
  const Assignment a0 = Assignment::from(out.last(1, MessageType::kAssign));
  const Assignment a1 = Assignment::from(out.last(2, MessageType::kAssign));
  CHECK(a0.buddy_port == 0);
  CHECK(a0.buddy_host.empty());
  CHECK(a1.buddy_port == 41000);

  FakeOutbox alone_out;
  RendezvousRounds alone(static_settings(1), alone_out, t0);
  join0.nnodes = "1";
  alone.on_connect(1, "10.77.0.1", t0);
  alone.on_message(1, join0.to_message(), t0);
  CHECK(Assignment::from(alone_out.last(1, MessageType::kAssign)).buddy_port == 0);
}

TEST_CASE("static: a different nproc is an error on every node naming both values and hosts", "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2), out, t0);
  two_nodes_join(rounds, t0, 4);
  CHECK(rounds.finished());
  CHECK(rounds.final_exit_code() == 2);
  const std::string expected =
      "node 1 (hostB, 10.77.0.2) has --nproc 4, node 0 (hostA) has --nproc 2; pass the same --nproc on every node, "
      "or --allow-uneven-nproc";
  for (ConnectionId id : {1, 2}) {
    Message reject = out.last(id, MessageType::kReject);
    CHECK(reject.text("text") == expected);
    CHECK(reject.integer("exit_code") == 2);
  }
  CHECK(out.closed.size() == 2);
}

TEST_CASE("static: the message names node 0's value as the reference whatever the arrival order", "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(3), out, t0);
  rounds.on_connect(2, "10.77.0.2", t0);
  rounds.on_message(2, join_request(1, "hostB", 4).to_message(), t0);  // node 1 first, with the odd --nproc
  rounds.on_connect(3, "10.77.0.3", t0);
  rounds.on_message(3, join_request(2, "hostC", 2).to_message(), t0);
  CHECK_FALSE(rounds.finished());  // nothing to compare with before node 0 is here
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, join_request(0, "hostA", 2).to_message(), t0);
  REQUIRE(rounds.finished());
  CHECK(out.last(1, MessageType::kReject).text("text") ==
        "node 1 (hostB, 10.77.0.2) has --nproc 4, node 0 (hostA) has --nproc 2; pass the same --nproc on every node, "
        "or --allow-uneven-nproc");
  CHECK(out.last(3, MessageType::kReject).text("text") == out.last(1, MessageType::kReject).text("text"));
}

TEST_CASE("static: a refusal reaches agents that connect afterwards, until every node rank was told",
          "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(3), out, t0);
  two_nodes_join(rounds, t0, 4);
  REQUIRE(rounds.finished());
  CHECK(rounds.answers_latecomers());  // node 2 may still be trying to join
  rounds.on_connect(3, "10.77.0.3", t0 + 1s);
  Message late = out.last(3, MessageType::kReject);
  CHECK(late.integer("exit_code") == 2);
  CHECK_THAT(late.text("text"), Catch::Contains("has --nproc 4"));
  CHECK(std::count(out.closed.begin(), out.closed.end(), 3) == 1);
  CHECK(std::count(out.dropped.begin(), out.dropped.end(), 3) == 0);  // flushed: it reads the reject

  FakeOutbox all;
  RendezvousRounds everyone(static_settings(2), all, t0);
  two_nodes_join(everyone, t0, 4);
  CHECK_FALSE(everyone.answers_latecomers());  // both node ranks were told
}

TEST_CASE("the hosting agent stopped before the first round tells every agent at once", "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(3), out, t0);
  two_nodes_join(rounds, t0);
  REQUIRE(
      rounds.abandon(kNodeLostExitCode, "node 0 (hostA), which hosts the rendezvous, was stopped by SIGINT", t0 + 1s));
  CHECK(rounds.finished());
  for (ConnectionId id : {1, 2}) {
    Message finish = out.last(id, MessageType::kFinish);
    CHECK(finish.integer("exit_code") == kNodeLostExitCode);
    CHECK_THAT(finish.text("text"), Catch::Contains("was stopped by SIGINT"));
  }
  CHECK_FALSE(rounds.answers_latecomers());  // the user stopped it: nothing lingers

  FakeOutbox running_out;
  RendezvousRounds running(static_settings(2), running_out, t0);
  two_nodes_join(running, t0);
  REQUIRE(running.phase() == RendezvousRounds::Phase::kRunning);
  CHECK_FALSE(running.abandon(kNodeLostExitCode, "gone", t0 + 1s));  // a running round ends through the leave message
  CHECK_FALSE(running.finished());
}

TEST_CASE("static: uneven nproc when every node allows it, ranks follow node order", "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2), out, t0);
  JoinRequest node0 = join_request(0, "hostA", 3), node1 = join_request(1, "hostB", 1);
  node0.allow_uneven_nproc = node1.allow_uneven_nproc = true;
  rounds.on_connect(2, "10.77.0.2", t0);
  rounds.on_message(2, node1.to_message(), t0);  // node 1 first: order of arrival does not matter
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, node0.to_message(), t0);
  Assignment a = Assignment::from(out.last(2, MessageType::kAssign));
  CHECK(a.nproc_per_node == std::vector<int>{3, 1});
  CHECK(a.first_rank(1) == 3);
  CHECK(a.world_size() == 4);
}

TEST_CASE("static: config, run id, duplicate ranks and versions must agree", "[rdzv][rounds]") {
  auto reject_text = [](JoinRequest second) {
    FakeOutbox out;
    RendezvousRounds rounds(static_settings(2), out, t0);
    rounds.on_connect(1, "127.0.0.1", t0);
    rounds.on_message(1, join_request(0, "hostA").to_message(), t0);
    rounds.on_connect(2, "10.77.0.2", t0);
    rounds.on_message(2, second.to_message(), t0);
    REQUIRE(rounds.finished());
    CHECK(out.last(1, MessageType::kReject).text("text") == out.last(2, MessageType::kReject).text("text"));
    return out.last(1, MessageType::kReject).text("text");
  };
  Config changed;
  changed.train.max_steps = 30;
  JoinRequest config = join_request(1, "hostB");
  config.config_lines = job_fingerprint(changed).lines;
  config.config_hash = job_fingerprint(changed).hash;
  CHECK(reject_text(config) ==
        "node 1 (hostB, 10.77.0.2) runs a different config than node 0 (hostA) (train.max_steps: 30 vs 0; "
        "node 1 (hostB, 10.77.0.2)'s value first, node 0 (hostA)'s second); pass the same config file "
        "and overrides on every node");
  JoinRequest run_id = join_request(1, "hostB");
  run_id.run_id = "other";
  CHECK_THAT(reject_text(run_id), Catch::Contains("has --run-id other, node 0 (hostA) has --run-id job"));
  JoinRequest duplicate = join_request(0, "hostB");
  CHECK(reject_text(duplicate) ==
        "node rank 0 was claimed twice: by hostA and by hostB, 10.77.0.2; give each node its own --node-rank");
  JoinRequest version = join_request(1, "hostB");
  version.version = "0.2.0";
  CHECK_THAT(reject_text(version), Catch::Contains("runs mgtrain 0.2.0, node 0 (hostA) runs mgtrain 0.1.0"));
  JoinRequest nnodes = join_request(1, "hostB");
  nnodes.nnodes = "3";
  CHECK_THAT(reject_text(nnodes), Catch::Contains("has --nnodes 3, node 0 (hostA) has --nnodes 2"));
}

TEST_CASE("static: a node without a run id adopts node 0's", "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2), out, t0);
  JoinRequest node1 = join_request(1, "hostB");
  node1.run_id = "20260101-000000-abcd";
  node1.run_id_generated = true;
  // its paths name its own run id until it adopts node 0's ("job"), which must not count as a difference
  Config mine;
  mine.checkpoint.dir = "runs/20260101-000000-abcd/checkpoints";
  Config theirs;
  theirs.checkpoint.dir = "runs/job/checkpoints";
  node1.config_lines = job_fingerprint(mine).lines;
  node1.config_hash = job_fingerprint(mine).hash;
  JoinRequest node0 = join_request(0, "hostA");
  node0.config_lines = job_fingerprint(theirs).lines;
  node0.config_hash = job_fingerprint(theirs).hash;
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, node0.to_message(), t0);
  rounds.on_connect(2, "10.77.0.2", t0);
  rounds.on_message(2, node1.to_message(), t0);
  REQUIRE_FALSE(rounds.finished());
  CHECK(Assignment::from(out.last(2, MessageType::kAssign)).run_id == "job");
}

TEST_CASE("static: the join timeout names the nodes that arrived and those that did not", "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(3), out, t0);
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, join_request(0, "hostA").to_message(), t0);
  REQUIRE(rounds.next_deadline());
  for (int s = 1; s <= 9; ++s) {  // node 0 keeps beating (node_timeout is 3 s)
    rounds.on_message(1, heartbeat_message(), t0 + std::chrono::seconds(s));
    rounds.on_time(t0 + std::chrono::seconds(s));
  }
  CHECK_FALSE(rounds.finished());
  CHECK(out.to(1, MessageType::kHeartbeat).size() >= 1);  // the waiting agent hears from the server
  rounds.on_time(t0 + 10s);
  REQUIRE(rounds.finished());
  Message finish = out.last(1, MessageType::kFinish);
  CHECK(finish.integer("exit_code") == kNodeLostExitCode);
  CHECK_THAT(finish.text("text"), Catch::Contains("not every node arrived within launch.join_timeout (10 s)") &&
                                      Catch::Contains("arrived: node 0 (hostA); missing: node ranks 1, 2") &&
                                      Catch::Contains("--join-timeout"));
}

TEST_CASE("fate sharing: one node's failure stops the others, restarts are global, then the root cause's code",
          "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2, 1), out, t0);
  two_nodes_join(rounds, t0);
  out.clear();
  rounds.on_message(2, workers_failed_message(worker_failure(0, 3, 7)), t0 + 1s);
  CHECK(rounds.phase() == RendezvousRounds::Phase::kStopping);
  Message stop = out.last(1, MessageType::kStop);
  CHECK(stop.integer("round") == 0);
  CHECK(stop.text("reason") == "rank 3 (local rank 1) on node 1 (hostB, 10.77.0.2): exit code 7");
  CHECK(out.to(2, MessageType::kStop).empty());  // it stops itself
  rounds.on_message(2, workers_ended_message(0, kEndedFailed, 7), t0 + 1s);
  CHECK(out.to(1, MessageType::kAssign).empty());  // node 0's workers are still stopping
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 2s);
  // restart 1 of 1: both nodes, round 1, a fresh store port
  Assignment again = Assignment::from(out.last(1, MessageType::kAssign));
  CHECK(again.round == 1);
  CHECK(again.master_port == 40001);
  CHECK(rounds.restarts_used() == 1);
  out.clear();
  rounds.on_message(1, workers_failed_message(worker_failure(1, 0, 3)), t0 + 3s);
  CHECK_FALSE(out.to(2, MessageType::kStop).empty());
  rounds.on_message(1, workers_ended_message(1, kEndedFailed, 3), t0 + 3s);
  rounds.on_message(2, workers_ended_message(1, kEndedStopped, 0), t0 + 4s);
  REQUIRE(rounds.finished());
  for (ConnectionId id : {1, 2}) {
    Message finish = out.last(id, MessageType::kFinish);
    CHECK(finish.integer("exit_code") == 3);
    CHECK(finish.flag("has_cause"));
    NodeFailure cause = NodeFailure::read_from(finish, "cause.");
    CHECK(cause.node_rank == 0);
    CHECK(cause.global_rank == 0);
    CHECK(cause.round == 1);
    CHECK_THAT(finish.text("text"), Catch::Contains("no restart left (launch.max_restarts 1)"));
  }
}

TEST_CASE("a worker's exit 2 (bad input) ends the job with restarts left, the torchrun personality restarts",
          "[rdzv][rounds]") {
  for (Personality personality : {Personality::Mgtrain, Personality::Torchrun}) {
    DYNAMIC_SECTION((personality == Personality::Mgtrain ? "mgtrain launch" : "torchrun")) {
      FakeOutbox out;
      RoundsSettings settings = static_settings(2, 3);
      settings.personality = personality;
      RendezvousRounds rounds(settings, out, t0);
      two_nodes_join(rounds, t0);
      out.clear();
      rounds.on_message(2, workers_failed_message(worker_failure(0, 3, 2)), t0 + 1s);
      rounds.on_message(2, workers_ended_message(0, kEndedFailed, 2), t0 + 1s);
      rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 2s);
      if (personality == Personality::Mgtrain) {
        REQUIRE(rounds.finished());
        CHECK(rounds.restarts_used() == 0);
        Message finish = out.last(1, MessageType::kFinish);
        CHECK(finish.integer("exit_code") == 2);
        CHECK_THAT(finish.text("text"), Catch::Contains("exit code 2, which means bad input") &&
                                            Catch::Contains("not restarted") &&
                                            Catch::Contains("(3 of launch.max_restarts 3 left unused)"));
      } else {
        CHECK_FALSE(rounds.finished());
        CHECK(rounds.restarts_used() == 1);
        CHECK(Assignment::from(out.last(1, MessageType::kAssign)).round == 1);
      }
    }
  }
}

TEST_CASE("a round where every node succeeds ends the job with 0, a checkpointed stop with 75", "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2), out, t0);
  two_nodes_join(rounds, t0);
  rounds.on_message(1, workers_ended_message(0, kEndedSuccess, 0), t0 + 1s);
  CHECK_FALSE(rounds.finished());
  rounds.on_message(2, workers_ended_message(0, kEndedSuccess, 0), t0 + 2s);
  REQUIRE(rounds.finished());
  CHECK(out.last(2, MessageType::kFinish).integer("exit_code") == 0);
  CHECK_FALSE(out.last(2, MessageType::kFinish).flag("has_cause"));

  FakeOutbox out75;
  RendezvousRounds saved(static_settings(2, 3), out75, t0);
  two_nodes_join(saved, t0);
  saved.on_message(1, workers_ended_message(0, kEndedCheckpoint, 75), t0 + 1s);
  saved.on_message(2, workers_ended_message(0, kEndedCheckpoint, 75), t0 + 1s);
  REQUIRE(saved.finished());
  CHECK(out75.last(1, MessageType::kFinish).integer("exit_code") == 75);  // no restart: not a failure
}

TEST_CASE(
    "a silent node is declared dead a node timeout after its heartbeat was due, a static job cannot restart without it",
    "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2, 5), out, t0);
  two_nodes_join(rounds, t0);
  for (int tick = 1; tick <= 3; ++tick) {  // node 0 keeps talking, node 1 is silent
    rounds.on_message(1, heartbeat_message(), t0 + std::chrono::seconds(tick));
    rounds.on_time(t0 + std::chrono::seconds(tick));
  }
  CHECK(rounds.phase() == RendezvousRounds::Phase::kRunning);
  REQUIRE(rounds.next_deadline());
  CHECK(*rounds.next_deadline() <= t0 + 4s);  // heartbeat interval (1 s) + node timeout (3 s)
  rounds.on_message(1, heartbeat_message(), t0 + 4s);
  rounds.on_time(t0 + 4s);
  CHECK(rounds.phase() == RendezvousRounds::Phase::kStopping);
  CHECK(out.last(1, MessageType::kStop).text("reason") ==
        "node 1 (hostB, 10.77.0.2): sent nothing for 4 s; a heartbeat was due every 1 s; launch.node_timeout 3 s");
  CHECK(std::find(out.dropped.begin(), out.dropped.end(), 2) != out.dropped.end());
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 5s);
  REQUIRE(rounds.finished());
  Message finish = out.last(1, MessageType::kFinish);
  CHECK(finish.integer("exit_code") == kNodeLostExitCode);
  CHECK_THAT(finish.text("text"),
             Catch::Contains("a static job restarts only with all 2 nodes, and node rank 1 is gone"));
  NodeFailure cause = NodeFailure::read_from(finish, "cause.");
  CHECK(cause.node_lost);
  CHECK(cause.node_rank == 1);
}

TEST_CASE("a node that leaves on a signal ends the job with its code", "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2, 3), out, t0);
  two_nodes_join(rounds, t0);
  rounds.on_message(2, leave_message(130, "was stopped by SIGINT"), t0 + 1s);
  CHECK(out.last(1, MessageType::kStop).text("reason") == "node 1 (hostB, 10.77.0.2): was stopped by SIGINT");
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 2s);
  REQUIRE(rounds.finished());
  CHECK(out.last(1, MessageType::kFinish).integer("exit_code") == 130);
}

TEST_CASE("dynamic: ranks on arrival, the round closes at MIN after the last call, a late node scales it up",
          "[rdzv][rounds][dynamic]") {
  FakeOutbox out;
  RendezvousRounds rounds(dynamic_settings(2, 3, 1), out, t0);
  rounds.on_connect(2, "10.77.0.2", t0);
  rounds.on_message(2, dynamic_join("hostB").to_message(), t0);
  rounds.on_connect(1, "127.0.0.1", t0 + 1s);
  rounds.on_message(1, dynamic_join("hostA").to_message(), t0 + 1s);
  CHECK(rounds.phase() == RendezvousRounds::Phase::kGathering);
  REQUIRE(rounds.next_deadline());
  CHECK(*rounds.next_deadline() <= t0 + 3s);  // last call: 2 s after MIN arrived
  rounds.on_time(t0 + 3s);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  CHECK(Assignment::from(out.last(1, MessageType::kAssign)).node_rank ==
        0);  // the server's host: its rank 0 hosts the store
  CHECK(Assignment::from(out.last(2, MessageType::kAssign)).node_rank == 1);
  // a late node: the round (2 of at most 3) restarts with 3, at once since that is MAX
  rounds.on_connect(3, "10.77.0.3", t0 + 4s);
  rounds.on_message(3, dynamic_join("hostC").to_message(), t0 + 4s);
  CHECK_THAT(out.last(3, MessageType::kWait).text("text"), Catch::Contains("it restarts to admit this node"));
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 5s);
  rounds.on_message(2, workers_ended_message(0, kEndedStopped, 0), t0 + 5s);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  Assignment late = Assignment::from(out.last(3, MessageType::kAssign));
  CHECK(late.round == 1);
  CHECK(late.restart_count == 0);
  CHECK(late.nnodes() == 3);
  CHECK(late.node_rank == 2);
  // a failure: every member stops, then the next round takes all three again, counted as a restart
  rounds.on_message(2, workers_failed_message(worker_failure(1, 2, 1)), t0 + 6s);
  rounds.on_message(2, workers_ended_message(1, kEndedFailed, 1), t0 + 6s);
  rounds.on_message(1, workers_ended_message(1, kEndedStopped, 0), t0 + 6s);
  rounds.on_message(3, workers_ended_message(1, kEndedStopped, 0), t0 + 6s);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  Assignment again = Assignment::from(out.last(3, MessageType::kAssign));
  CHECK(again.round == 2);
  CHECK(again.restart_count == 1);
  CHECK(again.node_rank == 2);
  CHECK(Assignment::from(out.last(2, MessageType::kAssign)).node_rank == 1);
}

TEST_CASE("dynamic: MAX nodes close the round at once, survivors >= MIN restart without a lost node",
          "[rdzv][rounds][dynamic]") {
  FakeOutbox out;
  RendezvousRounds rounds(dynamic_settings(2, 3, 1), out, t0);
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, dynamic_join("hostA").to_message(), t0);
  rounds.on_connect(2, "10.77.0.2", t0);
  rounds.on_message(2, dynamic_join("hostB").to_message(), t0);
  rounds.on_connect(3, "10.77.0.3", t0);
  rounds.on_message(3, dynamic_join("hostC").to_message(), t0);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);  // no last call with MAX
  rounds.on_disconnect(3, "closed the connection", t0 + 1s);
  CHECK(out.last(1, MessageType::kStop).text("reason") == "node 2 (hostC, 10.77.0.3): closed the connection");
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 2s);
  rounds.on_message(2, workers_ended_message(0, kEndedStopped, 0), t0 + 2s);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  CHECK(Assignment::from(out.last(2, MessageType::kAssign)).nnodes() == 2);
}

TEST_CASE("dynamic: too few survivors wait for newcomers, then give up with the root cause",
          "[rdzv][rounds][dynamic]") {
  FakeOutbox out;
  RendezvousRounds rounds(dynamic_settings(2, 2, 2), out, t0);
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, dynamic_join("hostA", "2").to_message(), t0);
  rounds.on_connect(2, "10.77.0.2", t0);
  rounds.on_message(2, dynamic_join("hostB", "2").to_message(), t0);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  rounds.on_disconnect(2, "closed the connection", t0 + 1s);
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 1s);
  CHECK(rounds.phase() == RendezvousRounds::Phase::kGathering);
  CHECK_THAT(out.last(1, MessageType::kWait).text("text"), Catch::Contains("waiting for at least 2 nodes"));
  for (int s = 2; s <= 11; ++s) {
    rounds.on_message(1, heartbeat_message(), t0 + std::chrono::seconds(s));
    rounds.on_time(t0 + std::chrono::seconds(s));
  }
  REQUIRE(rounds.finished());
  Message finish = out.last(1, MessageType::kFinish);
  CHECK(finish.integer("exit_code") == kNodeLostExitCode);
  CHECK_THAT(finish.text("text"), Catch::Contains("could not restart: only 1 node arrived"));
}

TEST_CASE("bytes that are not the protocol drop that connection only", "[rdzv][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2), out, t0);
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, join_request(0, "hostA").to_message(), t0);
  rounds.on_connect(9, "10.0.0.9", t0);
  rounds.on_disconnect(9, "sent bytes that are not mgtrain's rendezvous protocol", t0);
  rounds.on_connect(8, "10.0.0.8", t0);
  rounds.on_message(8, join_request(1, "hostB").to_message(), t0);
  CHECK(rounds.phase() == RendezvousRounds::Phase::kRunning);
  CHECK_FALSE(rounds.finished());
}

TEST_CASE(
    "job-wide status: each member's latest report of the round, a failed rank exited at once, cleared by the next",
    "[rdzv][rounds][status]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2, 1), out, t0);
  two_nodes_join(rounds, t0);
  const auto report = [](int round, int node_rank, int first_rank, long first_pid) {
    NodeStatus status;
    status.round = round;
    status.node_rank = node_rank;
    status.host = node_rank == 0 ? "hostA" : "hostB";
    for (int local = 0; local < 2; ++local) {
      RankRow row;
      row.rank = first_rank + local;
      row.local_rank = local;
      row.pid = first_pid + local;
      row.state = "running";
      status.ranks.push_back(row);
    }
    return status.to_message();
  };
  rounds.on_message(1, report(0, 0, 0, 100), t0 + 1s);
  rounds.on_message(2, report(0, 1, 2, 200), t0 + 1s);
  rounds.on_message(2, report(0, 1, 2, 300), t0 + 2s);  // the latest wins
  rounds.on_message(2, report(7, 1, 2, 900), t0 + 2s);  // another round's: ignored
  REQUIRE(rounds.node_status().size() == 2);
  CHECK(rounds.node_status().at(0).host == "hostA");
  CHECK(rounds.node_status().at(1).ranks.at(1).pid == 301);
  // A node that claims another's node rank is not believed.
  rounds.on_message(2, report(0, 0, 0, 555), t0 + 2s);
  CHECK(rounds.node_status().at(0).ranks.at(0).pid == 100);
  // Rank 3 fails on node 1: the host shows it exited before node 1's next report.
  NodeFailure failure = worker_failure(0, 3, 7);
  failure.node_rank = 1;
  rounds.on_message(2, workers_failed_message(failure), t0 + 3s);
  CHECK(rounds.node_status().at(1).ranks.at(1).state == "exited");
  CHECK(rounds.node_status().at(1).ranks.at(0).state == "running");
  // The restart's round starts with no reports.
  rounds.on_message(2, workers_ended_message(0, kEndedFailed, 7), t0 + 3s);
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 4s);
  REQUIRE(rounds.round() == 1);
  CHECK(rounds.node_status().empty());
}

TEST_CASE("the rounds' history: who took part, why each round started and how it ended", "[rdzv][rounds][history]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2, 1), out, t0);
  two_nodes_join(rounds, t0);
  REQUIRE(rounds.history().size() == 1);
  const RoundRecord& first = rounds.history()[0];
  CHECK(first.round == 0);
  CHECK(first.started_by == "start");
  CHECK(first.world_size == 4);
  REQUIRE(first.members.size() == 2);
  CHECK(first.members[1].host == "hostB");
  CHECK(first.members[1].address == "10.77.0.2");
  CHECK(first.members[1].first_rank == 2);
  CHECK(first.ended_by.empty());
  CHECK(rounds.run_id() == "job");
  // A failure, the restart, then success.
  rounds.on_message(2, workers_failed_message(worker_failure(0, 3, 7)), t0 + 1s);
  rounds.on_message(2, workers_ended_message(0, kEndedFailed, 7), t0 + 1s);
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 2s);
  REQUIRE(rounds.history().size() == 2);
  CHECK(rounds.history()[0].ended_by == "failure");
  CHECK(rounds.history()[0].cause == "rank 3 (local rank 1) on node 1 (hostB, 10.77.0.2): exit code 7");
  CHECK(rounds.history()[0].end == t0 + 2s);
  CHECK(rounds.history()[1].started_by == "restart");
  CHECK(rounds.history()[1].restart_count == 1);
  rounds.on_message(1, workers_ended_message(1, kEndedSuccess, 0), t0 + 5s);
  rounds.on_message(2, workers_ended_message(1, kEndedSuccess, 0), t0 + 5s);
  REQUIRE(rounds.finished());
  CHECK(rounds.history()[1].ended_by == "finished");
  CHECK(rounds.history()[1].end == t0 + 5s);
}

TEST_CASE("a report of the round before, arriving once the next began, still counts for that round's last step",
          "[rdzv][rounds][history]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2, 1), out, t0);
  two_nodes_join(rounds, t0);
  const auto report = [](int round, int node_rank, long long step) {
    NodeStatus status;
    status.round = round;
    status.node_rank = node_rank;
    status.host = node_rank == 0 ? "hostA" : "hostB";
    RankRow row;
    row.rank = node_rank * 2;
    row.state = "exited";
    row.step = step;
    status.ranks.push_back(row);
    return status.to_message();
  };
  rounds.on_message(1, report(0, 0, 100), t0 + 1s);
  rounds.on_message(2, workers_failed_message(worker_failure(0, 3, 7)), t0 + 2s);
  rounds.on_message(2, workers_ended_message(0, kEndedFailed, 7), t0 + 2s);
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 2s);
  REQUIRE(rounds.round() == 1);
  // Node 0's last look at its stopped rank of round 0, sent after round 1 began: round 0's last step, not round 1's.
  rounds.on_message(1, report(0, 0, 130), t0 + 2500ms);
  rounds.on_message(1, report(0, 0, 120), t0 + 2600ms);  // older than what the round has: no change
  REQUIRE(rounds.history().size() == 2);
  CHECK(rounds.history()[0].last_step == 130);
  CHECK_FALSE(rounds.history()[1].last_step.has_value());
  CHECK_FALSE(rounds.history()[1].first_step.has_value());
  CHECK(rounds.node_status().empty());  // nor is it this round's status

  // Round 1's first steps: it resumed from the lowest start any rank reports, and from what that rank says it was.
  const auto resumed = [](int node_rank, long long step, long long start, std::optional<StartSource> from) {
    NodeStatus status;
    status.round = 1;
    status.node_rank = node_rank;
    status.host = node_rank == 0 ? "hostA" : "hostB";
    RankRow row;
    row.rank = node_rank * 2;
    row.state = "running";
    row.step = step;
    row.start_step = start;
    row.start_source = from;
    status.ranks.push_back(row);
    return status.to_message();
  };
  rounds.on_message(2, resumed(1, 125, 125, StartSource::kSnapshot), t0 + 3s);  // no step made yet: not counted
  rounds.on_message(1, resumed(0, 127, 125, StartSource::kSnapshot), t0 + 4s);
  REQUIRE(rounds.history()[1].resumed_step == 125);
  CHECK(rounds.history()[1].resumed_step_exact);
  CHECK(rounds.history()[1].resumed_from == StartSource::kSnapshot);
}
