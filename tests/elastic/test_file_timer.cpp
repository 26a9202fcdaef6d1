// The file timer's protocol and table (torch's FileTimerServer semantics), and the launcher's own
// TORCHELASTIC_ERROR_FILE in torch's format.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "elastic/file_timer_table.hpp"
#include "supervise/failure_report.hpp"

using namespace mgtrain;

namespace {
std::string request(long pid, const std::string& scope, double expiration, int signal = 9) {
  return nlohmann::json{
             {"version", 1}, {"pid", pid}, {"scope_id", scope}, {"expiration_time", expiration}, {"signal", signal}}
             .dump() +
         "\n";
}
}  // namespace

TEST_CASE("file timer: acquire, release and expiry per (pid, scope)", "[file_timer]") {
  FileTimerTable table;
  CHECK(table.feed(request(10, "a", 100.0) + request(10, "b", 105.0) + request(11, "a", 103.0)).empty());
  CHECK(table.size() == 3);
  CHECK(*table.next_expiration() == 100.0);
  CHECK(table.feed(request(10, "a", -1, 0)).empty());  // release
  CHECK(*table.next_expiration() == 103.0);
  CHECK(table.take_expired(102.9).empty());
  std::vector<ExpiredFileTimer> expired = table.take_expired(104.0);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].pid == 11);
  CHECK(expired[0].scope_id == "a");
  CHECK(expired[0].signal == 9);
  CHECK(table.size() == 1);
  // A second acquire of the same scope replaces the first; an expired pid loses every timer.
  table.feed(request(10, "b", 200.0) + request(10, "c", 150.0));
  expired = table.take_expired(160.0);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].scope_id == "c");
  CHECK(table.size() == 0);
  CHECK(!table.next_expiration());
}

TEST_CASE("file timer: lines split across reads, and lines not understood are named and skipped", "[file_timer]") {
  FileTimerTable table;
  const std::string line = request(7, "x", 50.0);
  CHECK(table.feed(line.substr(0, 10)).empty());
  CHECK(table.size() == 0);
  CHECK(table.feed(line.substr(10)).empty());
  CHECK(table.size() == 1);
  std::vector<std::string> problems =
      table.feed("not json\n{\"version\": 2, \"pid\": 1}\n" + request(-3, "y", 1.0) + "\n");
  REQUIRE(problems.size() == 3);
  CHECK_THAT(problems[0], Catch::StartsWith("line 2 of the timer pipe: not JSON"));
  CHECK_THAT(problems[1], Catch::Contains("\"version\" is not 1"));
  CHECK_THAT(problems[2], Catch::Contains("\"pid\" is not a positive integer"));
  table.forget_pid(7);
  CHECK(table.size() == 0);
}

TEST_CASE("the launcher's error file copies the root cause's with errorCode, and lists the other failures",
          "[error_file]") {
  FailureReport report;
  report.run_id = "r";
  FailedWorker& cause = report.root_cause;
  cause.global_rank = 1;
  cause.status = ExitStatus::exited(3);
  cause.stderr_log = "/logs/r/attempt_0/rank_1/stderr.log";
  cause.error_file = TorchErrorRecord{"ValueError: bad", "Traceback", "1700000000", "", ""};
  FailedWorker other;
  other.global_rank = 0;
  other.status = ExitStatus::killed_by(15);
  other.stderr_log = "/logs/r/attempt_0/rank_0/stderr.log";
  other.error_file = TorchErrorRecord{"KeyboardInterrupt: ", "", "", "", ""};
  report.other_failures.push_back(other);
  const std::string child =
      R"({"message": {"message": "ValueError: bad", "extraInfo": {"py_callstack": "Traceback", "timestamp": "1700000000"}}})";
  nlohmann::json copied = nlohmann::json::parse(launcher_error_file_json(report, child, 1800000000));
  CHECK(copied["message"]["message"] == "ValueError: bad");
  CHECK(copied["message"]["extraInfo"]["py_callstack"] == "Traceback");
  CHECK(copied["message"]["errorCode"] == 3);
  REQUIRE(copied["other_failures"].size() == 1);
  CHECK(copied["other_failures"][0]["rank"] == 0);
  CHECK(copied["other_failures"][0]["exitcode"] == -15);  // torch's convention for signals
  CHECK(copied["other_failures"][0]["error_file"] == "/logs/r/attempt_0/rank_0/error.json");
  CHECK(copied["other_failures"][0]["message"] == "KeyboardInterrupt: ");

  // Without the worker's file: torch's ChildFailedError text.
  cause.error_file.reset();
  nlohmann::json own = nlohmann::json::parse(launcher_error_file_json(report, std::nullopt, 1800000000));
  const std::string message = own["message"]["message"];
  CHECK_THAT(message, Catch::StartsWith("ChildFailedError: \n====") && Catch::Contains("r FAILED") &&
                          Catch::Contains("Root Cause (first observed failure):\n[0]:") &&
                          Catch::Contains("  rank      : 1 (local_rank: 0)") &&
                          Catch::Contains("exitcode  : 3 (pid: 0)") && Catch::Contains("[1]:\n") &&
                          Catch::Contains("exitcode  : -15 (pid: 0) (SIGTERM)"));
  CHECK(own["message"]["extraInfo"]["timestamp"] == "1800000000");
  CHECK(own["message"]["errorCode"] == 3);
}
