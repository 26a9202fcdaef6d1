// Joiners that do not match a running job: once the first round has started, a node with another config, run id
// or version, or one claiming a rank that is held, is refused alone (exit 2 on that node) and the job goes on
// untouched; before the first round the disagreement still ends the job on every node.
#include <catch2/catch.hpp>

#include <chrono>

#include "rounds_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::rdzv;
using namespace mgtrain::rdzv::testing;
using namespace std::chrono_literals;

namespace {

JoinRequest with_config(JoinRequest join, const Config& config) {
  join.config_lines = job_fingerprint(config).lines;
  join.config_hash = job_fingerprint(config).hash;
  return join;
}

}  // namespace

TEST_CASE("static: a joiner with another config after the first round is refused alone", "[rdzv][rounds][joiners]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2), out, t0);
  two_nodes_join(rounds, t0);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  out.clear();
  Config changed;
  changed.optim.lr = 0.5;
  rounds.on_connect(3, "10.77.0.9", t0 + 1s);
  rounds.on_message(3, with_config(join_request(1, "hostX"), changed).to_message(), t0 + 1s);
  // The newcomer hears why and goes; nobody else hears anything.
  const Message refusal = out.last(3, MessageType::kReject);
  CHECK(refusal.integer("exit_code") == exit_code::kUsage);
  CHECK_THAT(refusal.text("text"), Catch::Contains("optim.lr: 0.5 vs 0.01") && Catch::Contains("hostX"));
  CHECK(out.to(1, MessageType::kReject).empty());
  CHECK(out.to(2, MessageType::kReject).empty());
  CHECK(out.to(1, MessageType::kStop).empty());
  CHECK(out.to(2, MessageType::kStop).empty());
  CHECK(rounds.phase() == RendezvousRounds::Phase::kRunning);
  REQUIRE_FALSE(out.notes.empty());
  CHECK_THAT(out.notes.back(), Catch::Contains("refused hostX, 10.77.0.9") && Catch::Contains("optim.lr") &&
                                   Catch::Contains("the job goes on"));
  // The job ends well as if nothing happened.
  rounds.on_message(1, workers_ended_message(0, kEndedSuccess, 0), t0 + 2s);
  rounds.on_message(2, workers_ended_message(0, kEndedSuccess, 0), t0 + 2s);
  REQUIRE(rounds.finished());
  CHECK(*rounds.final_exit_code() == 0);
}

TEST_CASE("static: after the first round a rank claimed again is refused alone, other versions too",
          "[rdzv][rounds][joiners]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2), out, t0);
  two_nodes_join(rounds, t0);
  rounds.on_connect(3, "10.77.0.9", t0 + 1s);
  rounds.on_message(3, join_request(0, "hostX").to_message(), t0 + 1s);
  CHECK_THAT(out.last(3, MessageType::kReject).text("text"), Catch::Contains("node rank 0"));
  JoinRequest version = join_request(1, "hostY");
  version.version = "9.9.9";
  rounds.on_connect(4, "10.77.0.10", t0 + 1s);
  rounds.on_message(4, version.to_message(), t0 + 1s);
  CHECK_THAT(out.last(4, MessageType::kReject).text("text"), Catch::Contains("runs mgtrain 9.9.9"));
  CHECK(rounds.phase() == RendezvousRounds::Phase::kRunning);
  CHECK(out.to(1, MessageType::kReject).empty());
  CHECK(out.to(2, MessageType::kStop).empty());
}

TEST_CASE("dynamic: a joiner with another config while the round runs is refused alone", "[rdzv][rounds][joiners]") {
  FakeOutbox out;
  RendezvousRounds rounds(dynamic_settings(2, 3), out, t0);
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, dynamic_join("hostA").to_message(), t0);
  rounds.on_connect(2, "10.77.0.2", t0);
  rounds.on_message(2, dynamic_join("hostB").to_message(), t0);
  rounds.on_time(t0 + 3s);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  Config changed;
  changed.train.max_steps = 7;
  rounds.on_connect(3, "10.77.0.3", t0 + 4s);
  rounds.on_message(3, with_config(dynamic_join("hostC"), changed).to_message(), t0 + 4s);
  CHECK_THAT(out.last(3, MessageType::kReject).text("text"), Catch::Contains("train.max_steps: 7 vs 0"));
  // No scale-up for a node that does not match: the round goes on with two.
  CHECK(out.to(1, MessageType::kRegroup).empty());
  CHECK(rounds.phase() == RendezvousRounds::Phase::kRunning);
  CHECK_FALSE(rounds.scaling_up());
}

TEST_CASE("before the first round a disagreement still ends the job on every node", "[rdzv][rounds][joiners]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(3), out, t0);
  two_nodes_join(rounds, t0);
  Config changed;
  changed.optim.lr = 0.5;
  rounds.on_connect(3, "10.77.0.3", t0);
  rounds.on_message(3, with_config(join_request(2, "hostC"), changed).to_message(), t0);
  REQUIRE(rounds.finished());
  CHECK(out.last(1, MessageType::kReject).text("text") == out.last(3, MessageType::kReject).text("text"));
}
