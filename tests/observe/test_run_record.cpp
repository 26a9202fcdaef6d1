// run.json: round trip, finished statuses, a record left "running" by a launcher that is gone reads as
// "interrupted" (dead pid, reused pid, another boot), and a relaunch keeps the earlier record.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "observe/run_record.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

TEST_CASE("run record: written atomically and read back field by field", "[run-record]") {
  const testing::TempDir temp_dir("mgtrain-run-record-roundtrip");
  const fs::path dir = temp_dir.path();
  RunRecord record = start_run_record("r1", {"node-a", "node-b"}, 2, 8);
  CHECK(record.status == "running");
  CHECK(record.launcher.pid == getpid());
  CHECK(record.launcher.start_ticks > 0);
  CHECK_FALSE(record.command_line.empty());  // this test binary's /proc/self/cmdline
  record.command_line.push_back("with \"quotes\" and \\ and\nnewline");
  write_run_record(dir.string(), record);
  CHECK(fs::exists(dir / "run.json"));

  auto back = read_run_record(dir.string());
  REQUIRE(back);
  CHECK(back->run_id == "r1");
  CHECK(back->status == "running");
  CHECK_FALSE(back->exit_code);
  CHECK_FALSE(back->end_time);
  CHECK(back->command_line == record.command_line);
  CHECK(back->hosts == std::vector<std::string>{"node-a", "node-b"});
  CHECK(back->nnodes == 2);
  CHECK(back->world_size == 8);
  CHECK(back->start_time == Approx(record.start_time).margin(0.001));
  CHECK(back->cwd == fs::current_path().string());
  CHECK(back->launcher.pid == record.launcher.pid);
  CHECK(back->launcher.boot_id == record.launcher.boot_id);
  CHECK(effective_status(*back) == "running");  // this process wrote it and still runs

  finish_run_record(record, finished_status(3, false, false), 3, 2);
  write_run_record(dir.string(), record);
  back = read_run_record(dir.string());
  CHECK(back->status == "failed");
  CHECK(back->exit_code == 3);
  REQUIRE(back->end_time);
  CHECK(*back->end_time >= back->start_time);
  CHECK(back->attempts == 2);
  CHECK(back->stragglers.empty());
  CHECK(run_record_to_json(record).find("stragglers") == std::string::npos);  // only when there were any
  // Straggler episodes: one over, one still open.
  record.stragglers = {StragglerRecord{2, 0, 1763800000.25, 1763800041.5, 0.7142, 1.021, 0.65},
                       StragglerRecord{1, 1, 1763800100.0, std::nullopt, 3.5, 5.0, 3.5}};
  write_run_record(dir.string(), record);
  back = read_run_record(dir.string());
  REQUIRE(back->stragglers.size() == 2);
  CHECK(back->stragglers[0].rank == 2);
  CHECK(back->stragglers[0].start == Approx(1763800000.25).margin(0.001));
  REQUIRE(back->stragglers[0].end);
  CHECK(*back->stragglers[0].end == Approx(1763800041.5).margin(0.001));
  CHECK(back->stragglers[0].step_rate == Approx(0.7142));
  CHECK(back->stragglers[0].median_step_rate == Approx(1.021));
  CHECK(back->stragglers[0].lowest_step_rate == Approx(0.65));
  CHECK(back->stragglers[1].attempt == 1);
  CHECK_FALSE(back->stragglers[1].end);
  // No temporary files left beside it.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.is_regular_file();
  CHECK(files == 1);
}

TEST_CASE("run record: the status of a finished launch", "[run-record]") {
  CHECK(finished_status(0, false, false) == "succeeded");
  CHECK(finished_status(1, false, false) == "failed");
  CHECK(finished_status(137, false, false) == "failed");
  CHECK(finished_status(130, true, false) == "stopped");
  CHECK(finished_status(75, false, true) == "stopped");
}

TEST_CASE("run record: running with a launcher that is gone reads as interrupted", "[run-record]") {
  RunRecord record = start_run_record("r2", {"here"}, 1, 1);
  SECTION("the launcher process exited") {
    pid_t child = fork();
    if (child == 0) {
      pause();
      _exit(0);
    }
    REQUIRE(child > 0);
    record.launcher.pid = child;
    record.launcher.start_ticks = 0;  // not compared
    CHECK(launcher_state(record.launcher) == LauncherState::kAlive);
    kill(child, SIGKILL);
    // Killed but not collected yet (a zombie): already gone.
    for (int i = 0; i < 100 && launcher_state(record.launcher) != LauncherState::kGone; ++i) usleep(10000);
    CHECK(effective_status(record) == "interrupted");
    waitpid(child, nullptr, 0);
    CHECK(effective_status(record) == "interrupted");
  }
  SECTION("its pid now belongs to another process") {
    record.launcher.start_ticks += 12345;
    CHECK(launcher_state(record.launcher) == LauncherState::kGone);
    CHECK(effective_status(record) == "interrupted");
  }
  SECTION("the machine rebooted since") {
    record.launcher.boot_id = "00000000-0000-0000-0000-000000000000";
    CHECK(effective_status(record) == "interrupted");
  }
  SECTION("it ran on another host: cannot tell, stays running") {
    record.launcher.host = "some-other-host.invalid";
    CHECK(launcher_state(record.launcher) == LauncherState::kUnknown);
    CHECK(effective_status(record) == "running");
  }
  SECTION("a finished record is never reinterpreted") {
    record.launcher.boot_id = "another-boot";
    finish_run_record(record, "succeeded", 0, 1);
    CHECK(effective_status(record) == "succeeded");
  }
}

TEST_CASE("run record: a relaunch keeps the earlier record", "[run-record]") {
  const testing::TempDir temp_dir("mgtrain-run-record-relaunch");
  const fs::path dir = temp_dir.path();
  CHECK(keep_earlier_run_record(dir.string(), "").empty());  // nothing to keep
  RunRecord first = start_run_record("r3", {"here"}, 1, 1);
  finish_run_record(first, "failed", 1, 1);
  write_run_record(dir.string(), first);

  SECTION("into the archive prepare_run_directory made") {
    fs::create_directories(dir / "earlier" / "1");
    CHECK(keep_earlier_run_record(dir.string(), (dir / "earlier" / "1").string()) == (dir / "earlier" / "1").string());
  }
  SECTION("into the next free earlier/<k>/") {
    fs::create_directories(dir / "earlier" / "1");
    CHECK(keep_earlier_run_record(dir.string(), "") == (dir / "earlier" / "2").string());
    CHECK(read_run_record((dir / "earlier" / "2").string())->status == "failed");
  }
  CHECK_FALSE(fs::exists(dir / "run.json"));
}

TEST_CASE("run record: a damaged file is an error naming it", "[run-record]") {
  const testing::TempDir temp_dir("mgtrain-run-record-damaged");
  const fs::path dir = temp_dir.path();
  CHECK_FALSE(read_run_record(dir.string()));
  std::ofstream(dir / "run.json") << "{\"run_id\": \"x\", \"status\": ";
  CHECK_THROWS_WITH(read_run_record(dir.string()), Contains("run.json") && Contains("not valid JSON"));
  std::ofstream(dir / "run.json") << "{\"run_id\": \"x\"}";
  CHECK_THROWS_WITH(read_run_record(dir.string()), Contains("run.json") && Contains("\"status\" is missing"));
  std::ofstream(dir / "run.json") << "[1, 2]";
  CHECK_THROWS_WITH(read_run_record(dir.string()), Contains("not a JSON object"));
}

TEST_CASE("run.json keeps where each attempt started, and refuses a source it does not know", "[run_record]") {
  RunRecord record;
  record.run_id = "one";
  record.start_time = 1764000000;
  CHECK(run_record_to_json(record).find("resumes") == std::string::npos);  // only when there were any
  record.resumes = {{1, 45, StartSource::kSnapshot, 1764000010.5}, {2, 40, StartSource::kCheckpoint, 1764000020}};
  const std::string text = run_record_to_json(record);
  CHECK_THAT(text, Catch::Contains("\"from\": \"snapshot\"") && Catch::Contains("\"from\": \"checkpoint\""));
  const RunRecord back = parse_run_record(text, "run.json");
  REQUIRE(back.resumes.size() == 2);
  CHECK(back.resumes[0].attempt == 1);
  CHECK(back.resumes[0].step == 45);
  CHECK(back.resumes[0].from == StartSource::kSnapshot);
  CHECK(back.resumes[0].time == Approx(1764000010.5));
  CHECK(back.resumes[1].from == StartSource::kCheckpoint);
  CHECK_THROWS_WITH(
      parse_run_record(
          R"({"run_id":"x","status":"running","start_time":1,"resumes":[{"attempt":1,"step":4,"from":"tape"}]})",
          "run.json"),
      Catch::Contains("run.json: resumes: \"from\" is 'tape'"));
}

TEST_CASE("run.json keeps each node's snapshot replication, and refuses a malformed entry", "[run_record]") {
  RunRecord record;
  record.run_id = "job";
  record.start_time = 1764000000;
  CHECK(run_record_to_json(record).find("replication") == std::string::npos);  // only when any
  record.replication = {
      {0, "hostA", "node 1 (hostB, 10.77.0.2)", true, 12, 1, 178800000, 600, 1764000100.25, 12, {}, 1764000101.5},
      {1, "hostB", "", false, 0, 0, 0, std::nullopt, std::nullopt, 12, {}, 1764000101.5}};
  const std::string text = run_record_to_json(record);
  CHECK_THAT(text, Catch::Contains("\"buddy\": null") && Catch::Contains("\"sent_step\": 600"));
  const RunRecord back = parse_run_record(text, "run.json");
  REQUIRE(back.replication.size() == 2);
  CHECK(back.replication[0].buddy == "node 1 (hostB, 10.77.0.2)");
  CHECK(back.replication[0].sent == 12);
  CHECK(back.replication[0].skipped == 1);
  CHECK(back.replication[0].bytes_sent == 178800000);
  CHECK(back.replication[0].sent_step == 600);
  CHECK(back.replication[0].sent_time == Approx(1764000100.25));
  CHECK(back.replication[0].time == Approx(1764000101.5));
  CHECK(back.replication[1].buddy.empty());
  CHECK(!back.replication[1].sent_step);
  CHECK(back.replication[1].received == 12);
  CHECK_THROWS_WITH(
      parse_run_record(R"({"run_id":"x","status":"running","start_time":1,"replication":[{"host":"a"}]})", "run.json"),
      Catch::Contains("run.json: replication") && Catch::Contains("node_rank"));
  CHECK_THROWS_WITH(
      parse_run_record(R"({"run_id":"x","status":"running","start_time":1,"replication":{}})", "run.json"),
      Catch::Contains("run.json: replication is not a list"));
}

TEST_CASE("run.json keeps a multi-node job's rounds and its nodes, and reads them back", "[run_record]") {
  RunRecord record;
  record.run_id = "job";
  record.start_time = 1764000000;
  RoundEntry failed;
  failed.round = 0;
  failed.started_by = "start";
  failed.start = 1764000001;
  failed.end = 1764000030.5;
  failed.world_size = 4;
  failed.nodes = {{0, "hostA", "127.0.0.1", 0, 2}, {1, "hostB", "10.77.0.2", 2, 2}};
  failed.ended_by = "failure";
  failed.cause = "rank 3 (local rank 1) on node 1 (hostB, 10.77.0.2): exit code 7";
  failed.recovery = RoundEntry::Recovery{};
  failed.recovery->fault = 1764000029;
  failed.recovery->resumed_step = 1200;
  failed.recovery->resumed_step_exact = true;
  failed.recovery->resumed_from = StartSource::kSnapshot;
  RoundEntry running = failed;
  running.recovery.reset();
  running.round = 1;
  running.restart_count = 1;
  running.started_by = "restart";
  running.end.reset();
  running.ended_by.clear();
  running.cause.clear();
  running.nodes.pop_back();
  running.world_size = 2;
  record.rounds = {failed, running};
  const std::string text = run_record_to_json(record);
  CHECK_THAT(text, Catch::Contains("\"nodes\": [") && Catch::Contains("\"ended_by\": \"failure\"") &&
                       Catch::Contains("\"ended_by\": null"));
  const RunRecord back = parse_run_record(text, "run.json");
  REQUIRE(back.rounds.size() == 2);
  CHECK(back.rounds[0].cause == failed.cause);
  CHECK(back.rounds[0].end == Approx(1764000030.5));
  CHECK(back.rounds[0].nodes.size() == 2);
  CHECK(back.rounds[0].nodes[1].address == "10.77.0.2");
  REQUIRE(back.rounds[0].recovery);
  CHECK(back.rounds[0].recovery->resumed_step == 1200);
  CHECK(back.rounds[0].recovery->resumed_from == StartSource::kSnapshot);
  CHECK_FALSE(back.rounds[1].recovery);
  CHECK(back.rounds[1].started_by == "restart");
  CHECK(!back.rounds[1].end);
  CHECK(back.rounds[1].ended_by.empty());
  CHECK_THROWS_WITH(parse_run_record(R"({"run_id":"x","status":"running","start_time":1,"rounds":{}})", "run.json"),
                    Catch::Contains("run.json: rounds is not a list"));
}
