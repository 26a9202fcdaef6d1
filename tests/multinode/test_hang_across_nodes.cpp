// A hang across nodes (multinode/hang_across_nodes.hpp): the job's verdict from every node's stalled ranks, the
// messages on the wire, and the rendezvous server holding the stop until every node has its diagnostics (or the
// deadline), then naming the rank that stopped first on any node; and what a node sends and reports of it.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "multinode/hang_across_nodes.hpp"
#include "multinode/node_failure.hpp"
#include "rounds_fixture.hpp"

using namespace mgtrain::rdzv;
using namespace mgtrain::rdzv::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

// A stalled rank as a node reports it: last progress at `ms` (Unix milliseconds), at `step`.
NodeFailure stalled(int rank, long long ms, long long step, bool hung = false) {
  NodeFailure failure;
  failure.round = 0;
  failure.global_rank = rank;
  failure.local_rank = rank % 2;
  failure.host = rank < 2 ? "hostA" : "hostB";
  failure.hung = hung;
  failure.waiting = !hung;
  failure.silent_s = 6;
  failure.last_progress_ms = ms;
  failure.has_last_step = true;
  failure.last_step = step;
  failure.exit_code = 124;
  failure.stacks = "attempt_0/rank_" + std::to_string(rank) + "/stacks.txt";
  failure.top_frames = {"frame_of_rank_" + std::to_string(rank) + " (w.py:1)"};
  failure.outcome = hung ? "hung: no progress for 6 s" : "waiting: no progress for 6 s";
  return failure;
}

RoundsSettings hang_settings(double diagnose_timeout_s = 2) {
  RoundsSettings settings = static_settings(2);
  settings.node_timeout_s = 60;  // nobody falls silent in these tests
  settings.diagnose_timeout_s = diagnose_timeout_s;
  return settings;
}

// Both nodes joined, round 0 runs; node 1 (connection 2) finds rank 3 hung at t0 + 10 s.
void node1_finds_rank3(RendezvousRounds& rounds, FakeOutbox& out) {
  two_nodes_join(rounds, t0);
  out.clear();
  rounds.on_message(2, hang_found_message(0, stalled(3, 1'000'000, 10, true)), t0 + 10s);
}

}  // namespace

TEST_CASE("the job's hung rank is the one whose progress stopped first on any node", "[rdzv][hang]") {
  // Node 0's local rule would name rank 0 (its earliest), node 1's rank 3: rank 3 stopped 2 s before rank 0.
  std::optional<JobHangVerdict> verdict = decide_job_hang({stalled(0, 1'002'000, 15, true), stalled(1, 1'002'100, 15),
                                                           stalled(2, 1'002'050, 15), stalled(3, 1'000'000, 10)});
  REQUIRE(verdict);
  CHECK(verdict->root_cause.global_rank == 3);
  CHECK(verdict->root_cause.hung);
  CHECK_FALSE(verdict->root_cause.waiting);
  CHECK(verdict->root_cause.exit_code == 124);
  CHECK(verdict->root_cause.outcome == "hung: no progress for 6 s (last step 10)");
  std::vector<int> others;
  for (const NodeFailure& other : verdict->others) {
    CHECK(other.waiting);
    CHECK_FALSE(other.hung);
    others.push_back(other.global_rank);
  }
  CHECK(others == std::vector<int>{0, 2, 1});  // by last progress
}

TEST_CASE("across nodes as on one: within the tie window the lower step decides, a stopped process is hung",
          "[rdzv][hang]") {
  std::optional<JobHangVerdict> tie = decide_job_hang({stalled(0, 1'000'000, 15), stalled(3, 1'000'500, 14)});
  REQUIRE(tie);
  CHECK(tie->root_cause.global_rank == 3);
  NodeFailure frozen = stalled(1, 1'005'000, 20);
  frozen.process_stopped = true;
  std::optional<JobHangVerdict> stopped = decide_job_hang({stalled(0, 1'000'000, 15), frozen});
  REQUIRE(stopped);
  CHECK(stopped->root_cause.global_rank == 1);
  CHECK_THAT(stopped->root_cause.outcome, Contains("its process stopped (SIGSTOP)"));
  // Ranks without a progress time are left out; none left: no verdict.
  NodeFailure unknown = stalled(2, 0, 0);
  CHECK_FALSE(decide_job_hang({unknown}));
  CHECK(decide_job_hang({unknown, stalled(0, 1'000'000, 3)})->root_cause.global_rank == 0);
}

TEST_CASE("diagnosed carries each rank's progress, stacks and top frames, and its list is bounded", "[rdzv][hang]") {
  NodeFailure touched = stalled(2, 1'000'000, 0);
  touched.has_last_step = false;  // a worker that only touches its progress file
  MessageDecoder decoder;
  const std::string bytes = encode(diagnosed_message(4, {touched, stalled(3, 999'000, 10, true)}));
  decoder.feed(bytes.data(), bytes.size());
  std::optional<Message> message = decoder.next();
  REQUIRE(message);
  CHECK(message->type == MessageType::kDiagnosed);
  CHECK(message->integer("round") == 4);
  std::vector<NodeFailure> ranks = read_failures(*message, "rank.", kMaxDiagnosedRanks);
  REQUIRE(ranks.size() == 2);
  CHECK_FALSE(ranks[0].has_last_step);
  CHECK(ranks[0].waiting);
  CHECK(ranks[1].hung);
  CHECK(ranks[1].last_progress_ms == 999'000);
  CHECK(ranks[1].last_step == 10);
  CHECK(ranks[1].stacks == "attempt_0/rank_3/stacks.txt");
  CHECK(ranks[1].top_frames == std::vector<std::string>{"frame_of_rank_3 (w.py:1)"});
  // A writer lists at most `limit` (the rest counted); a reader refuses a count above it.
  Message many = Message::of(MessageType::kDiagnosed);
  write_failures(many, "rank.", std::vector<NodeFailure>(5, touched), 3);
  CHECK(many.integer("rank.count") == 3);
  CHECK(many.integer("rank.left_out") == 2);
  CHECK(read_failures(many, "rank.", 3).size() == 3);
  CHECK_THROWS_AS(read_failures(many, "rank.", 2), ProtocolError);
  many.set("rank.count", -1);
  CHECK_THROWS_AS(read_failures(many, "rank.", 3), ProtocolError);
}

TEST_CASE("server: a node's hang makes every other node dump first, and the stop waits for all their answers",
          "[rdzv][rounds][hang]") {
  FakeOutbox out;
  RendezvousRounds rounds(hang_settings(), out, t0);
  node1_finds_rank3(rounds, out);
  // Node 0 is asked to collect its diagnostics; nobody is stopped yet.
  Message diagnose = out.last(1, MessageType::kDiagnose);
  CHECK(diagnose.integer("round") == 0);
  CHECK_THAT(diagnose.text("reason"), Contains("rank 3 (local rank 1) on node 1 (hostB, 10.77.0.2)"));
  CHECK(out.to(2, MessageType::kDiagnose).empty());  // it found the hang: it collects already
  CHECK(rounds.phase() == RendezvousRounds::Phase::kRunning);
  CHECK(out.to(1, MessageType::kStop).empty());
  // Node 1 has its stacks first: still no stop, node 0 is collecting.
  rounds.on_message(2, diagnosed_message(0, {stalled(2, 1'002'050, 15), stalled(3, 1'000'000, 10, true)}), t0 + 11s);
  CHECK(out.to(1, MessageType::kStop).empty());
  CHECK(out.to(2, MessageType::kStop).empty());
  // Node 0 answers (its local rule named rank 0): now every node is stopped, for rank 3.
  rounds.on_message(1, diagnosed_message(0, {stalled(0, 1'002'000, 15, true), stalled(1, 1'002'100, 15)}),
                    t0 + 11500ms);
  CHECK(rounds.phase() == RendezvousRounds::Phase::kStopping);
  for (ConnectionId id : {1, 2}) CHECK_THAT(out.last(id, MessageType::kStop).text("reason"), Contains("rank 3 "));
  CHECK_THAT(out.notes.back(), Contains("its progress stopped first of 4 stalled ranks"));
  rounds.on_message(1, workers_ended_message(0, kEndedFailed, 124), t0 + 12s);
  rounds.on_message(2, workers_ended_message(0, kEndedFailed, 124), t0 + 12s);
  REQUIRE(rounds.finished());
  // Both nodes hear the job's verdict: rank 3 on node 1 hung, ranks 0-2 waiting, exit code 124.
  for (ConnectionId id : {1, 2}) {
    Message finish = out.last(id, MessageType::kFinish);
    CHECK(finish.integer("exit_code") == 124);
    NodeFailure cause = NodeFailure::read_from(finish, "cause.");
    CHECK(cause.global_rank == 3);
    CHECK(cause.node_rank == 1);
    CHECK(cause.hung);
    CHECK(cause.last_step == 10);
    std::vector<NodeFailure> waiting = read_failures(finish, "waiting.", kMaxListedWaiting);
    REQUIRE(waiting.size() == 3);
    CHECK(waiting[0].global_rank == 0);
    CHECK(waiting[0].node_rank == 0);
    CHECK(waiting[0].waiting);
    CHECK_FALSE(waiting[0].hung);
  }
}

TEST_CASE("server: a node that does not answer holds the stop only until the diagnose timeout",
          "[rdzv][rounds][hang]") {
  FakeOutbox out;
  RendezvousRounds rounds(hang_settings(2), out, t0);
  node1_finds_rank3(rounds, out);
  rounds.on_message(2, diagnosed_message(0, {stalled(3, 1'000'000, 10, true)}), t0 + 11s);
  REQUIRE(rounds.next_deadline());
  CHECK(*rounds.next_deadline() <= t0 + 10s + 4s);  // diagnose_timeout 2 s + kDiagnoseSlackS
  rounds.on_time(t0 + 13s);
  CHECK(out.to(2, MessageType::kStop).empty());
  rounds.on_message(1, heartbeat_message(), t0 + 13s);
  rounds.on_message(2, heartbeat_message(), t0 + 13s);
  rounds.on_time(t0 + 14s);
  CHECK(rounds.phase() == RendezvousRounds::Phase::kStopping);
  CHECK_FALSE(out.to(1, MessageType::kStop).empty());
  CHECK_FALSE(out.to(2, MessageType::kStop).empty());
  bool said = false;
  for (const std::string& note : out.notes) said = said || note.find("no diagnostics from node 0") != std::string::npos;
  CHECK(said);
}

TEST_CASE("server: during a hang's diagnosis a failure or a lost node answers for its node, the hang stays the cause",
          "[rdzv][rounds][hang]") {
  SECTION("a waiting rank fails (its collective timed out)") {
    FakeOutbox out;
    RendezvousRounds rounds(hang_settings(), out, t0);
    node1_finds_rank3(rounds, out);
    rounds.on_message(1, workers_failed_message(worker_failure(0, 0, 1)), t0 + 10500ms);
    CHECK(out.to(2, MessageType::kStop).empty());  // node 1 is still collecting
    rounds.on_message(2, diagnosed_message(0, {stalled(3, 1'000'000, 10, true)}), t0 + 11s);
    CHECK(rounds.phase() == RendezvousRounds::Phase::kStopping);
    rounds.on_message(1, workers_ended_message(0, kEndedFailed, 1), t0 + 12s);
    rounds.on_message(2, workers_ended_message(0, kEndedFailed, 124), t0 + 12s);
    REQUIRE(rounds.finished());
    Message finish = out.last(1, MessageType::kFinish);
    CHECK(finish.integer("exit_code") == 124);
    CHECK(NodeFailure::read_from(finish, "cause.").global_rank == 3);
  }
  SECTION("node 0 goes away") {
    FakeOutbox out;
    RendezvousRounds rounds(hang_settings(), out, t0);
    node1_finds_rank3(rounds, out);
    rounds.on_disconnect(1, "connection reset", t0 + 10500ms);
    CHECK(out.to(2, MessageType::kStop).empty());
    rounds.on_message(2, diagnosed_message(0, {stalled(3, 1'000'000, 10, true)}), t0 + 11s);
    CHECK_FALSE(out.to(2, MessageType::kStop).empty());
    rounds.on_message(2, workers_ended_message(0, kEndedFailed, 124), t0 + 12s);
    REQUIRE(rounds.finished());
    NodeFailure cause = NodeFailure::read_from(out.last(2, MessageType::kFinish), "cause.");
    CHECK(cause.global_rank == 3);
    CHECK(cause.hung);
  }
  SECTION("launch.diagnose_timeout 0: the stop goes out at once") {
    FakeOutbox out;
    RendezvousRounds rounds(hang_settings(0), out, t0);
    node1_finds_rank3(rounds, out);
    CHECK(rounds.phase() == RendezvousRounds::Phase::kStopping);
    CHECK_FALSE(out.to(1, MessageType::kStop).empty());
  }
}

TEST_CASE("a node's report of a hang is the job's verdict: the hung rank elsewhere, the waiting ranks with facts",
          "[rdzv][hang]") {
  // This node's supervisor named its rank 0 hung (node 0's local rule); the job's verdict names rank 3 on node 1.
  mgtrain::FailureReport local;
  local.root_cause.global_rank = 0;
  local.root_cause.hung = true;
  local.root_cause.last_step = 15;
  local.root_cause.last_progress_unix_ms = 1'002'000;
  local.root_cause.top_frames = {std::string(1000, 'f'), "2", "3", "4", "5", "6", "7", "8", "9"};
  mgtrain::FailedWorker other;
  other.global_rank = 1;
  other.local_rank = 1;
  other.waiting = true;
  other.stderr_tail = {"a line that need not travel"};
  local.other_failures = {other};
  std::vector<NodeFailure> sent = mgtrain::local_hang_ranks(local, 0, 0, "node 0 (hostA)");
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].hung);
  CHECK(sent[0].has_last_step);
  CHECK(sent[0].last_step == 15);
  CHECK(sent[0].last_progress_ms == 1'002'000);
  CHECK(sent[0].top_frames.size() == 8);  // a few frames travel, failure.json names the file for the rest
  CHECK(sent[0].top_frames[0].size() == 300);
  CHECK(sent[1].waiting);
  CHECK(sent[1].stderr_tail.empty());

  mgtrain::LaunchPlan plan;
  plan.node_rank = 0;
  plan.run_id = "hang";
  NodeFailure cause = stalled(3, 1'000'000, 10, true);
  cause.node_rank = 1;
  cause.node = "node 1 (hostB)";
  std::vector<NodeFailure> waiting{stalled(0, 1'002'000, 15), stalled(2, 1'002'050, 15)};
  waiting[0].node_rank = 0;
  mgtrain::FailureReport report = mgtrain::job_failure_report(cause, waiting, local, plan, "node 0 (hostA)", 0, 124);
  CHECK(report.exit_code == 124);
  CHECK(report.root_cause.global_rank == 3);
  CHECK(report.root_cause.node_rank == 1);
  CHECK(report.root_cause.hung);
  CHECK(report.root_cause.last_step == 10);
  CHECK(report.root_cause.last_progress_utc == "1970-01-01T00:16:40.000Z");
  CHECK(report.root_cause.stacks == "attempt_0/rank_3/stacks.txt");
  CHECK(report.root_cause.top_frames == std::vector<std::string>{"frame_of_rank_3 (w.py:1)"});
  REQUIRE(report.other_failures.size() == 2);
  CHECK(report.other_failures[0].global_rank == 0);
  CHECK(report.other_failures[0].waiting);
  CHECK_FALSE(report.other_failures[0].hung);
  CHECK(report.other_failures[0].last_step == 15);
}
