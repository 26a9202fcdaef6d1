// Stacks on demand across nodes (multinode/stacks_across_nodes.hpp): a node's answer on the wire, bounded whatever
// it holds, refused when it does not parse; and the rendezvous server asking every member whose workers run,
// gathering the answers until all came or the deadline passed, one request at a time.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "multinode/stacks_across_nodes.hpp"
#include "rounds_fixture.hpp"

using namespace mgtrain::rdzv;
using namespace mgtrain::rdzv::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

RankStacksRow row(int rank, std::vector<std::string> frames = {"main (w.py:3)"}) {
  RankStacksRow r;
  r.rank = rank;
  r.local_rank = rank % 2;
  r.pid = 1000 + rank;
  r.outcome = "complete";
  r.python_frames = true;
  r.seconds = 0.25;
  r.stacks_file = "/runs/mn/node_1/attempt_0/rank_" + std::to_string(rank) + "/stacks-1.txt";
  r.top_frames = std::move(frames);
  r.notes = {"a note"};
  return r;
}

// The message through a frame and back, as the server reads it.
NodeStacks over_the_wire(const NodeStacks& stacks) {
  MessageDecoder decoder;
  const std::string frame = encode(stacks.to_message());
  decoder.feed(frame.data(), frame.size());
  std::optional<Message> message = decoder.next();
  REQUIRE(message);
  return NodeStacks::from(*message);
}

NodeStacks answer(int request, int round, std::vector<RankStacksRow> ranks) {
  NodeStacks stacks;
  stacks.request = request;
  stacks.round = round;
  stacks.host = "hostB";
  stacks.time = 1'700'000'000.5;
  stacks.seconds = 0.3;
  stacks.ranks = std::move(ranks);
  return stacks;
}

RoundsSettings settings() {
  RoundsSettings s = static_settings(2);
  s.node_timeout_s = 600;  // nobody falls silent here
  return s;
}

}  // namespace

TEST_CASE("a node's stacks answer travels whole", "[rdzv][stacks]") {
  NodeStacks sent = answer(3, 1, {row(2), row(3, {"waiting (w.py:8)", "main (w.py:11)"})});
  sent.node_rank = 1;
  sent.attempt = 1;
  const NodeStacks got = over_the_wire(sent);
  CHECK(got.request == 3);
  CHECK(got.round == 1);
  CHECK(got.node_rank == 1);
  CHECK(got.host == "hostB");
  CHECK(got.outcome == NodeStacksOutcome::kDumped);
  CHECK(got.time == Approx(1'700'000'000.5));
  REQUIRE(got.ranks.size() == 2);
  CHECK(got.ranks[1].rank == 3);
  CHECK(got.ranks[1].local_rank == 1);
  CHECK(got.ranks[1].pid == 1003);
  CHECK(got.ranks[1].outcome == "complete");
  CHECK(got.ranks[1].python_frames);
  CHECK_FALSE(got.ranks[1].native_frames);
  CHECK(got.ranks[1].seconds == Approx(0.25));
  CHECK(got.ranks[1].stacks_file == "/runs/mn/node_1/attempt_0/rank_3/stacks-1.txt");
  CHECK(got.ranks[1].top_frames == std::vector<std::string>{"waiting (w.py:8)", "main (w.py:11)"});
  CHECK(got.ranks[1].notes == std::vector<std::string>{"a note"});
  CHECK(got.ranks_left_out == 0);

  NodeStacks busy;
  busy.outcome = NodeStacksOutcome::kBusy;
  busy.message = "a hang's diagnostics run";
  CHECK(over_the_wire(busy).outcome == NodeStacksOutcome::kBusy);
  CHECK(over_the_wire(busy).message == "a hang's diagnostics run");
}

TEST_CASE("a node's stacks answer is bounded: frames, lines and ranks past the limits are cut and counted",
          "[rdzv][stacks]") {
  // The largest answer: every rank with too many frames and notes, each too long, multi-byte characters at the cut.
  std::string long_line;
  while (long_line.size() < 1000) long_line += "Ω frame\n";
  std::vector<RankStacksRow> ranks;
  for (int rank = 0; rank < kMaxStacksRanks + 44; ++rank) {
    RankStacksRow r = row(rank, std::vector<std::string>(20, long_line));
    r.notes = std::vector<std::string>(20, long_line);
    r.stacks_file = long_line;
    ranks.push_back(r);
  }
  const NodeStacks stacks = answer(1, 0, ranks);
  const std::string frame = encode(stacks.to_message());
  CHECK(frame.size() < kMaxPayloadBytes);
  const NodeStacks got = over_the_wire(stacks);
  CHECK(static_cast<int>(got.ranks.size()) == kMaxStacksRanks);
  CHECK(got.ranks_left_out == 44);
  const RankStacksRow& first = got.ranks.front();
  CHECK(static_cast<int>(first.top_frames.size()) == kMaxStacksLines);
  CHECK(static_cast<int>(first.notes.size()) == kMaxStacksNotes);
  for (const std::string& line : first.top_frames) {
    CHECK(line.size() <= kMaxStacksLineBytes);
    CHECK_THAT(line, Catch::EndsWith("..."));
    CHECK(line.find('\n') == std::string::npos);  // escaped: one frame, one line
    // Cut at a character: no UTF-8 lead byte without its continuation before the mark.
    const std::string before = line.substr(0, line.size() - 3);
    CHECK((static_cast<unsigned char>(before.back()) & 0xC0) != 0xC0);
  }
}

TEST_CASE("a stacks answer that does not parse is refused with what is wrong", "[rdzv][stacks]") {
  const auto error_of = [](Message message) {
    try {
      NodeStacks::from(message);
    } catch (const ProtocolError& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  const Message good = answer(1, 0, {row(0)}).to_message();
  Message too_many = good;
  too_many.set("count", kMaxStacksRanks + 1);
  CHECK_THAT(error_of(too_many), Contains("257 ranks"));
  Message outcome = good;
  outcome.set("outcome", "exploded");
  CHECK_THAT(error_of(outcome), Contains("outcome 'exploded'"));
  Message facts = good;
  facts.set("rank.0.facts", "0 0 1000 complete 1 0");
  CHECK_THAT(error_of(facts), Contains("rank.0.facts has 6 fields, not 7"));
  Message rank_outcome = good;
  rank_outcome.set("rank.0.facts", "0 0 1000 sideways 1 0 0.5");
  CHECK_THAT(error_of(rank_outcome), Contains("a rank's outcome 'sideways'"));
  Message lines = good;
  lines.set("rank.0.frames", std::string(kMaxStacksLineBytes + 1, 'x'));
  CHECK_THAT(error_of(lines), Contains("a line of rank.0.frames is 241 bytes long"));
  Message missing = good;
  missing.fields.erase("rank.0.notes");
  CHECK_THAT(error_of(missing), Contains("'rank.0.notes'"));
}

TEST_CASE("the server asks every member, gathers both answers, and takes one request at a time", "[rdzv][stacks]") {
  FakeOutbox out;
  RendezvousRounds rounds(settings(), out, t0);
  two_nodes_join(rounds, t0);
  REQUIRE(rounds.phase() == RoundPhase::kRunning);
  out.clear();
  CHECK_FALSE(rounds.start_stacks(10, t0 + 1s).has_value());
  for (ConnectionId connection : {1, 2}) {
    const Message ask = out.last(connection, MessageType::kDumpStacks);
    CHECK(ask.integer("round") == 0);
    CHECK(ask.integer("request") == 1);
    CHECK(ask.number("timeout") == Approx(10));
  }
  const std::optional<StacksRefusal> second = rounds.start_stacks(10, t0 + 1s);
  REQUIRE(second);
  CHECK(second->busy);
  CHECK_FALSE(rounds.take_stacks(t0 + 2s));
  rounds.on_message(2, answer(1, 0, {row(2), row(3)}).to_message(), t0 + 2s);
  rounds.on_message(2, answer(7, 0, {row(9)}).to_message(), t0 + 2s);  // another request's: ignored
  CHECK_FALSE(rounds.take_stacks(t0 + 2s));                            // node 0 still owes its answer
  rounds.on_message(1, answer(1, 0, {row(0), row(1)}).to_message(), t0 + 3s);
  const std::optional<JobStacks> job = rounds.take_stacks(t0 + 3s);
  REQUIRE(job);
  CHECK(job->round == 0);
  CHECK(job->seconds == Approx(2.0));
  REQUIRE(job->nodes.size() == 2);
  CHECK(job->nodes[0].node_rank == 0);
  CHECK(job->nodes[1].node_rank == 1);
  CHECK(job->nodes[1].ranks.size() == 2);
  CHECK(job->unanswered.empty());
  CHECK_FALSE(rounds.take_stacks(t0 + 3s));  // once
  out.clear();
  CHECK_FALSE(rounds.start_stacks(10, t0 + 4s).has_value());  // the next request
  CHECK(out.last(2, MessageType::kDumpStacks).integer("request") == 2);
  for (const std::string& note : out.notes) CHECK_THAT(note, !Contains("dropped"));  // nobody was, along the way
}

TEST_CASE("a node that does not answer by the deadline, or goes away, is named, and the answers of the others stand",
          "[rdzv][stacks]") {
  FakeOutbox out;
  RendezvousRounds rounds(settings(), out, t0);
  two_nodes_join(rounds, t0);
  REQUIRE_FALSE(rounds.start_stacks(5, t0 + 1s).has_value());
  REQUIRE(rounds.next_deadline());
  CHECK(*rounds.next_deadline() <= t0 + 1s + 7s);  // the request's deadline wakes the loop
  rounds.on_message(1, answer(1, 0, {row(0), row(1)}).to_message(), t0 + 2s);
  CHECK_FALSE(rounds.take_stacks(t0 + 7s));
  const std::optional<JobStacks> late = rounds.take_stacks(t0 + 8s);
  REQUIRE(late);
  REQUIRE(late->nodes.size() == 1);
  CHECK(late->nodes[0].node_rank == 0);
  REQUIRE(late->unanswered.size() == 1);
  CHECK_THAT(late->unanswered[0], Contains("node 1 (hostB") && Contains("no answer within 7 s"));

  // Gone while it owes its answer: named at once, and the request completes with the rest.
  REQUIRE_FALSE(rounds.start_stacks(5, t0 + 10s).has_value());
  rounds.on_message(1, answer(2, 0, {row(0), row(1)}).to_message(), t0 + 11s);
  rounds.on_disconnect(2, "connection reset", t0 + 11s);
  const std::optional<JobStacks> gone = rounds.take_stacks(t0 + 11s);
  REQUIRE(gone);
  REQUIRE(gone->unanswered.size() == 1);
  CHECK_THAT(gone->unanswered[0], Contains("node 1 (hostB") && Contains("gone before it answered"));
}

TEST_CASE("no round running, nothing to dump: the request is refused, not busy", "[rdzv][stacks]") {
  FakeOutbox out;
  RendezvousRounds rounds(settings(), out, t0);
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, join_request(0, "hostA").to_message(), t0);  // node 1 has not come: still gathering
  const std::optional<StacksRefusal> refused = rounds.start_stacks(5, t0);
  REQUIRE(refused);
  CHECK_FALSE(refused->busy);
  CHECK_THAT(refused->why, Contains("no round of the job runs now"));
  CHECK(out.to(1, MessageType::kDumpStacks).empty());
}
