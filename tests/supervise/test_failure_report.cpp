// The failure report: table, failure.json, torch's error file, JSON escaping.
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "elastic/torch_error_file.hpp"
#include "supervise/failure_report.hpp"
#include "util/time_format.hpp"

using namespace mgtrain;

namespace {
FailureReport sample_report() {
  FailureReport report;
  report.run_id = "run-1";
  report.run_dir = "/logs/run-1";
  report.exit_code = 3;
  report.attempt = 1;
  report.max_restarts = 1;
  FailedWorker& cause = report.root_cause;
  cause.global_rank = 3;
  cause.local_rank = 1;
  cause.attempt = 1;
  cause.host = "node7";
  cause.pid = 4242;
  cause.status = ExitStatus::exited(3);
  cause.time_utc = "2026-11-22T03:50:12.345Z";
  cause.stderr_log = "/logs/run-1/attempt_1/rank_3/stderr.log";
  cause.stderr_tail = {"Traceback (most recent call last):", "ValueError: \"bad\"\ttab"};
  cause.error_file = TorchErrorRecord{"ValueError: bad", "Traceback...\n  line 2", "1700000000", "", ""};
  FailedWorker other;
  other.global_rank = 2;
  other.pid = 4241;
  other.host = "node7";
  other.status = ExitStatus::killed_by(11);
  other.time_utc = "2026-11-22T03:50:12.400Z";
  report.other_failures.push_back(other);
  return report;
}
}  // namespace

TEST_CASE("the table leads with the root cause and its stderr, then the other failures", "[report]") {
  std::string text = format_failure_report(sample_report());
  CHECK_THAT(text, Catch::Contains("attempt 2 of 2"));
  CHECK_THAT(text, Catch::Contains("rank       3 (local rank 1) on node7"));
  CHECK_THAT(text, Catch::Contains("pid        4242"));
  CHECK_THAT(text, Catch::Contains("failure    exit code 3"));
  CHECK_THAT(text, Catch::Contains("error      ValueError: bad"));
  CHECK_THAT(text, Catch::Contains("    Traceback...\n      line 2\n"));
  CHECK_THAT(text, Catch::Contains("last 2 lines of stderr"));
  CHECK_THAT(text, Catch::Contains("    | Traceback (most recent call last):"));
  CHECK_THAT(text, Catch::Contains("rank 2 (local rank 0) on node7, pid 4241: signal SIGSEGV (11)"));
  CHECK(text.find("Root cause") < text.find("Other failures"));
  CHECK_THAT(text, Catch::Contains("/logs/run-1/failure.json"));
}

TEST_CASE("the summary line: the root cause in one line for a termination message", "[report]") {
  FailureReport report = sample_report();
  CHECK(failure_summary_line(report) ==
        "mgtrain: run run-1 failed (exit code 3): rank 3 (local rank 1) on node7: exit code 3: ValueError: bad");
  report.root_cause.error_file.reset();  // no error file: the last line of its stderr, control characters escaped
  CHECK(failure_summary_line(report) ==
        "mgtrain: run run-1 failed (exit code 3): rank 3 (local rank 1) on node7: exit code 3: ValueError: "
        "\"bad\"\\ttab");
  report.root_cause.stderr_tail.clear();
  CHECK(failure_summary_line(report) ==
        "mgtrain: run run-1 failed (exit code 3): rank 3 (local rank 1) on node7: exit code 3");

  FailureReport lost = sample_report();
  lost.root_cause.node_lost = true;
  lost.root_cause.node = "node 1 (hostB, 10.77.0.2)";
  lost.root_cause.node_problem = "sent nothing for 10 s (launch.node_timeout 10 s)";
  CHECK(failure_summary_line(lost) ==
        "mgtrain: run run-1 failed (exit code 3): node 1 (hostB, 10.77.0.2): sent nothing for 10 s "
        "(launch.node_timeout 10 s)");

  // Cut to the limit at a character's start: a 2-byte character never split.
  report.root_cause.stderr_tail = {std::string(5000, 'x') + "\xc3\xa9" + std::string(100, 'y')};
  const std::string cut = failure_summary_line(report);
  CHECK(cut.size() <= kSummaryLineLimit);
  CHECK_THAT(cut, Catch::EndsWith("xxx..."));
  const std::string short_cut = failure_summary_line(report, 80);
  CHECK(short_cut.size() <= 80);
  CHECK_THAT(short_cut, Catch::EndsWith("..."));
  report.root_cause.stderr_tail.clear();
  const std::size_t head = failure_summary_line(report).size() + 2;  // where the stderr line starts, after ": "
  report.root_cause.stderr_tail = {std::string(50, 'x') + "\xc3\xa9" + std::string(50, 'y')};
  // limit - 3 falls on the second byte of the 2-byte character: the cut goes back to its first.
  CHECK(failure_summary_line(report, head + 50 + 1 + 3) == failure_summary_line(report).substr(0, head + 50) + "...");
}

TEST_CASE("failure.json carries the same facts and is valid JSON", "[report]") {
  std::string json = failure_report_to_json(sample_report());
  YAML::Node root = YAML::Load(json);  // JSON is YAML
  CHECK(root["schema"].as<std::string>() == "mgtrain.failure/1");
  CHECK(root["exit_code"].as<int>() == 3);
  CHECK(root["root_cause"]["global_rank"].as<int>() == 3);
  CHECK(root["root_cause"]["exit_code"].as<int>() == 3);
  CHECK(root["root_cause"]["signal"].IsNull());
  CHECK(root["root_cause"]["stderr_tail"][1].as<std::string>() == "ValueError: \"bad\"\ttab");
  CHECK(root["root_cause"]["error_file"]["traceback"].as<std::string>() == "Traceback...\n  line 2");
  CHECK(root["other_failures"][0]["signal_name"].as<std::string>() == "SIGSEGV");
  CHECK(root["other_failures"][0]["exit_code"].as<int>() == 139);
  CHECK(root["other_failures"][0]["error_file"].IsNull());
}

TEST_CASE("a hung worker is reported by its silence", "[report]") {
  FailureReport report = sample_report();
  report.root_cause.hung = true;
  report.root_cause.silent_s = 30.2;
  CHECK_THAT(format_failure_report(report), Catch::Contains("failure    hung: no progress for 30 s\n"));
  YAML::Node root = YAML::Load(failure_report_to_json(report));
  CHECK(root["root_cause"]["hung"].as<bool>());
  CHECK_FALSE(root["root_cause"]["waiting"].as<bool>());
  CHECK(root["root_cause"]["exit_code"].IsNull());
  CHECK(root["root_cause"]["last_step"].IsNull());  // a program that only touches its progress file
  CHECK(root["root_cause"]["stacks"].IsNull());
  report.root_cause.silent_s = 2.5;
  CHECK_THAT(format_failure_report(report), Catch::Contains("hung: no progress for 2.5 s"));
}

TEST_CASE("a hang names the hung rank with its last step, time and stacks, and the ranks waiting for it", "[report]") {
  FailureReport report = sample_report();
  report.root_cause.hung = true;
  report.root_cause.silent_s = 10.04;
  report.root_cause.last_step = 41;
  report.root_cause.last_progress_utc = "2026-11-22T03:50:02.000Z";
  report.root_cause.process_stopped = true;
  report.root_cause.stacks = "/runs/r/attempt_0/rank_1/stacks.txt";
  FailedWorker waiting = report.root_cause;
  waiting.global_rank = waiting.local_rank = 0;
  waiting.hung = waiting.process_stopped = false;
  waiting.waiting = true;
  waiting.silent_s = 9.8;
  waiting.stacks = "";
  report.other_failures = {waiting};
  const std::string text = format_failure_report(report);
  CHECK_THAT(text, Catch::Contains("failure    hung: no progress for 10 s (last step 41), its process stopped"));
  CHECK_THAT(text, Catch::Contains("progress   last report 2026-11-22T03:50:02.000Z"));
  CHECK_THAT(text, Catch::Contains("stacks     /runs/r/attempt_0/rank_1/stacks.txt"));
  CHECK_THAT(text, Catch::Contains("waiting: no progress for 9.8 s (last step 41)"));
  YAML::Node root = YAML::Load(failure_report_to_json(report));
  CHECK(root["root_cause"]["last_step"].as<long>() == 41);
  CHECK(root["root_cause"]["last_progress_time"].as<std::string>() == "2026-11-22T03:50:02.000Z");
  CHECK(root["root_cause"]["stacks"].as<std::string>() == "/runs/r/attempt_0/rank_1/stacks.txt");
  CHECK(root["root_cause"]["process_stopped"].as<bool>());
  CHECK(root["other_failures"][0]["waiting"].as<bool>());
  CHECK_FALSE(root["other_failures"][0]["hung"].as<bool>());
  CHECK(root["other_failures"][0]["exit_code"].IsNull());
  CHECK(root["other_failures"][0]["silent_s"].as<double>() == Approx(9.8));
}

TEST_CASE("torch's error file, in both of its shapes", "[report]") {
  TorchErrorRecord current = parse_torch_error_file(
      R"({"message": {"message": "RuntimeError: boom \/ \u00e9", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"x.py\", line 3\nRuntimeError: boom", "timestamp": "1700000000"}}})");
  CHECK(current.problem.empty());
  CHECK(current.message == "RuntimeError: boom / \xC3\xA9");
  CHECK(current.traceback == "Traceback (most recent call last):\n  File \"x.py\", line 3\nRuntimeError: boom");
  CHECK(current.timestamp == "1700000000");

  TorchErrorRecord old =
      parse_torch_error_file(R"({"message": "SignalException: got SIGTERM", "timestamp": 1700000001})");
  CHECK(old.message == "SignalException: got SIGTERM");
  CHECK(old.timestamp == "1700000001");
}

TEST_CASE("a malformed error file is reported, not fatal", "[report]") {
  for (const char* text :
       {"", "{\"message\": ", "[1, 2]", "{\"other\": 1}", "{\"message\": {\"extraInfo\": 3}}", "\x01\x02 not json"}) {
    TorchErrorRecord record = parse_torch_error_file(text);
    CHECK_FALSE(record.problem.empty());
  }
  FailureReport report = sample_report();
  report.root_cause.error_file = parse_torch_error_file("{oops");
  CHECK_THAT(format_failure_report(report), Catch::Contains("error file could not be read"));
  CHECK_NOTHROW(YAML::Load(failure_report_to_json(report)));
}

TEST_CASE("JSON strings are escaped and kept valid UTF-8", "[report]") {
  FailureReport report = sample_report();
  report.root_cause.stderr_tail = {"a\"b\\c\n\x01", "caf\xC3\xA9", "bad\xFF"};
  const std::string json = failure_report_to_json(report);
  CHECK_THAT(json, Catch::Contains("\"a\\\"b\\\\c\\n\\u0001\""));
  const nlohmann::json parsed = nlohmann::json::parse(json);
  const nlohmann::json& tail = parsed["root_cause"]["stderr_tail"];
  CHECK(tail[0] == "a\"b\\c\n\x01");
  CHECK(tail[1] == "caf\xC3\xA9");
  CHECK(tail[2] == "bad\xEF\xBF\xBD");
}

TEST_CASE("UTC timestamps", "[report]") {
  CHECK(format_utc_millis(0) == "1970-01-01T00:00:00.000Z");
  CHECK(format_utc_millis(1700000000123LL) == "2023-11-14T22:13:20.123Z");
}

TEST_CASE("failure.json stays valid UTF-8 whatever a worker wrote to stderr", "[report]") {
  FailureReport report = sample_report();
  report.root_cause.stderr_tail = {"bad\xFF"};
  YAML::Node root = YAML::Load(failure_report_to_json(report));
  CHECK(root["root_cause"]["stderr_tail"][0].as<std::string>() == "bad\xEF\xBF\xBD");
}

TEST_CASE("missing torch hint: only for a quick failure that says torch is missing", "[python]") {
  const std::string stderr_text = "Traceback ...\nModuleNotFoundError: No module named 'torch'\n";
  const std::string hint = missing_torch_hint(stderr_text, 0.4, "/usr/bin/python3", "PYTHON_EXEC");
  CHECK_THAT(hint, Catch::Contains("/usr/bin/python3 (chosen by PYTHON_EXEC) cannot import torch") &&
                       Catch::Contains("--python") && Catch::Contains("launch.python"));
  CHECK(missing_torch_hint(stderr_text, 600, "/usr/bin/python3", "PYTHON_EXEC").empty());
  CHECK(missing_torch_hint("ModuleNotFoundError: No module named 'numpy'", 0.4, "/usr/bin/python3", "x").empty());
  CHECK(missing_torch_hint(stderr_text, 0.4, "", "x").empty());  // not a Python launch
}

TEST_CASE("an address in use is recognised in torch's and Python's words", "[report][port]") {
  CHECK(says_address_in_use({"x",
                             "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
                             "local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, "
                             "message: address already in use"}));
  CHECK(
      says_address_in_use({"[W socket.cpp:525] [c10d] The server socket has failed to bind to [::]:29500 (errno: "
                           "98 - Address already in use)."}));
  CHECK(says_address_in_use({"OSError: [Errno 98] Address already in use", "more"}));
  CHECK_FALSE(says_address_in_use({"RuntimeError: connection refused", "ValueError: bad batch"}));
  CHECK_FALSE(says_address_in_use({}));
}

TEST_CASE("port retries are not counted as restarts in the report's attempt", "[report][port]") {
  FailureReport report = sample_report();  // attempt 1 (attempt_1/), max_restarts 1
  report.attempt = 3;
  report.port_retries = 2;
  const std::string text = format_failure_report(report);
  CHECK_THAT(text, Catch::Contains("attempt 2 of 2 after 2 port retries,"));
  CHECK_THAT(text, Catch::Contains("attempt_3/"));  // the logs are still where they are
}

TEST_CASE("a hang's report groups the stalled ranks by identical top frames", "[report]") {
  FailureReport report = sample_report();
  report.root_cause.hung = true;
  report.root_cause.silent_s = 30;
  report.root_cause.top_frames = {"stuck_here (train.py:12) < step (train.py:40)"};
  report.other_failures.clear();
  for (int rank : {0, 1, 2, 4, 5}) {
    FailedWorker waiting;
    waiting.global_rank = rank;
    waiting.waiting = true;
    waiting.top_frames = {"all_reduce (distributed_c10d.py:2501) < step (train.py:40)"};
    report.other_failures.push_back(waiting);
  }
  const std::string text = format_failure_report(report);
  CHECK_THAT(text, Catch::Contains("Where the ranks are (2 places; identical top frames together):\n"
                                   "  ranks 0-2, 4, 5 (5): all_reduce (distributed_c10d.py:2501) < step (train.py:40)\n"
                                   "  rank 3 (1): stuck_here (train.py:12) < step (train.py:40)\n"));
  report.other_failures.clear();  // one rank alone: nothing to group
  CHECK_THAT(format_failure_report(report), !Catch::Contains("Where the ranks are"));
}
