// Kubernetes' termination message (launch/termination_message.hpp): which file, and what a file that cannot be
// written does (a warning, nothing thrown).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "launch/termination_message.hpp"
#include "support/temp_dir.hpp"
#include "util/file_io.hpp"

using namespace mgtrain;
using mgtrain::testing::TempDir;

TEST_CASE("the termination log: the named file, else Kubernetes' when it exists, or none", "[termination]") {
  TempDir dir("mgtrain-termination");
  const std::string kubernetes = dir.path() + "/termination-log";
  CHECK(termination_log_path("", kubernetes) == std::nullopt);  // not in a pod: nothing written
  std::ofstream(kubernetes).close();
  CHECK(termination_log_path("", kubernetes) == kubernetes);
  CHECK(termination_log_path("none", kubernetes) == std::nullopt);
  CHECK(termination_log_path(dir.path() + "/mine", kubernetes) == dir.path() + "/mine");
}

TEST_CASE("the termination message replaces the file, and an unwritable one is only a warning", "[termination]") {
  TempDir dir("mgtrain-termination");
  FailureReport report;
  report.run_id = "r1";
  report.exit_code = 1;
  report.root_cause.global_rank = 2;
  report.root_cause.local_rank = 0;
  report.root_cause.host = "h";
  report.root_cause.status = ExitStatus::exited(1);
  report.root_cause.stderr_tail = {"RuntimeError: boom"};
  const std::string path = dir.path() + "/message";
  std::ofstream(path) << std::string(200, '.') << "\n";
  report.exit_code = 3;
  write_termination_message(report, path, Personality::Mgtrain);
  CHECK(read_file(path) ==
        "mgtrain: run r1 failed (exit code 3): rank 2 (local rank 0) on h: exit code 1: RuntimeError: boom\n");
  write_termination_message(report, path, Personality::Torchrun);  // torchrun's launcher ends 1
  CHECK(read_file(path) ==
        "mgtrain: run r1 failed (exit code 1): rank 2 (local rank 0) on h: exit code 1: RuntimeError: boom\n");
  CHECK_NOTHROW(write_termination_message(report, dir.path() + "/no-such-folder/message", Personality::Mgtrain));
}
