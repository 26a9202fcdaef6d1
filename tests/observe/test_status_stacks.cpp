// POST /stacks's answer (observe/status_stacks.hpp): the JSON of a dump, of busy and of not running, and the HTTP
// status of each.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "observe/status_stacks.hpp"

using namespace mgtrain;
using Json = nlohmann::json;

TEST_CASE("/stacks JSON: every rank's file, outcome, top frames and notes", "[status][stacks]") {
  StacksDump dump;
  dump.attempt = 1;
  dump.time = 1700000000.1234;
  dump.seconds = 0.25;
  RankStacks first;
  first.rank = 2;
  first.local_rank = 0;
  first.pid = 41;
  first.stacks_file = "runs/r/attempt_1/rank_2/stacks-3.txt";
  first.outcome = "complete";
  first.python_frames = true;
  first.native_frames = true;
  first.top_frames = {"stuck_here (train.py:12) < main (train.py:40)", "helper \"quoted\" (t.py:1)"};
  first.seconds = 0.2;
  RankStacks gone;
  gone.rank = 3;
  gone.local_rank = 1;
  gone.pid = 42;
  gone.outcome = "failed";
  gone.notes = {"rank 3 (pid 42) ended before its stacks could be taken"};
  dump.ranks = {first, gone};
  CHECK(stacks_http_status(dump) == 200);
  const std::string text = stacks_to_json(dump, "r");
  CHECK(text.find('\n') == std::string::npos);  // compact
  const Json j = Json::parse(text);
  CHECK(j["run_id"] == "r");
  CHECK(j["attempt"] == 1);
  CHECK(j["time"].get<double>() == Approx(1700000000.123));
  CHECK(j["seconds"].get<double>() == Approx(0.25));
  REQUIRE(j["ranks"].size() == 2);
  const Json& r = j["ranks"][0];
  CHECK(r["rank"] == 2);
  CHECK(r["local_rank"] == 0);
  CHECK(r["pid"] == 41);
  CHECK(r["stacks_file"] == "runs/r/attempt_1/rank_2/stacks-3.txt");
  CHECK(r["outcome"] == "complete");
  CHECK(r["python_frames"] == true);
  CHECK(r["native_frames"] == true);
  CHECK(r["top_frames"][1] == "helper \"quoted\" (t.py:1)");
  CHECK(r["notes"].empty());
  CHECK(j["ranks"][1]["stacks_file"].is_null());  // nothing was written
  CHECK(j["ranks"][1]["notes"][0] == "rank 3 (pid 42) ended before its stacks could be taken");
  CHECK(j.find("error") == j.end());
}

TEST_CASE("/stacks JSON: busy and not running are errors with a message, HTTP 409", "[status][stacks]") {
  StacksDump busy;
  busy.outcome = StacksOutcome::kBusy;
  busy.message = "a dump is running";
  CHECK(stacks_http_status(busy) == 409);
  Json j = Json::parse(stacks_to_json(busy, "r"));
  CHECK(j["error"] == "busy");
  CHECK(j["message"] == "a dump is running");
  CHECK(j.find("ranks") == j.end());
  StacksDump idle;
  idle.outcome = StacksOutcome::kNotRunning;
  idle.message = "no rank runs";
  CHECK(stacks_http_status(idle) == 409);
  j = Json::parse(stacks_to_json(idle, "r"));
  CHECK(j["error"] == "not_running");
}
