// End to end through the real `mgtrain` binary: `mgtrain launch [flags] -- COMMAND`, torchrun's
// flag spellings, settings from YAML and MGTRAIN_LAUNCH_* variables, exit codes and the report.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "util/run_capture.hpp"
#include "launch_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;

namespace {

const std::string kMgtrain = std::string(MGTRAIN_BIN_DIR) + "/mgtrain";

CapturedRun mgtrain_launch(const TempDir& dir, std::vector<std::string> args, CaptureOptions options = {}) {
  args.insert(args.begin(), {kMgtrain, "launch", "--log-dir", dir / "runs"});
  options.timeout_s = 60;
  return run_and_capture(args, options);
}

}  // namespace

TEST_CASE("mgtrain launch --nproc 2 -- COMMAND runs two prefixed workers", "[binary][launch]") {
  TempDir dir;
  CapturedRun run = mgtrain_launch(dir, {"--nproc", "2", "--run-id", "e2e", "--", "sh", "-c", "echo \"hello from $RANK of $WORLD_SIZE\"; echo \"err $LOCAL_RANK\" >&2"});
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains("[rank 0] hello from 0 of 2\n") && Catch::Contains("[rank 1] hello from 1 of 2\n"));
  CHECK_THAT(run.err, Catch::Contains("[rank 1] err 1\n"));
  CHECK(read_text(dir / "runs/e2e/attempt_0/rank_1/stdout.log") == "hello from 1 of 2\n");
  CHECK(file_exists(dir / "runs/e2e/config.yaml"));
}

TEST_CASE("torchrun's spellings work: one word changes", "[binary][launch]") {
  TempDir dir;
  std::string worker = write_script(dir / "flaky.sh", "[ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ] || exit 3");
  CapturedRun run = mgtrain_launch(dir, {"--nproc_per_node", "2", "--max_restarts", "1", "--rdzv_id", "job7",
                                         "--master_port", "0", "--redirects", "3", "--", worker});
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK(file_exists(dir / "runs/job7/attempt_1/rank_1/stdout.log"));
}

TEST_CASE("a failing worker sets the exit code and writes failure.json", "[binary][launch]") {
  TempDir dir;
  CapturedRun run = mgtrain_launch(dir, {"--nproc", "2", "--run-id", "bad", "--", "sh", "-c",
                                         "[ \"$RANK\" = 1 ] && { echo 'it broke' >&2; exit 3; }; exec sleep 30"});
  CHECK(run.exit_code == 3);
  CHECK_THAT(run.err, Catch::Contains("Root cause (first failure):") && Catch::Contains("| it broke"));
  CHECK_THAT(read_text(dir / "runs/bad/failure.json"), Catch::Contains("\"exit_code\": 3"));
}

TEST_CASE("settings come from YAML and MGTRAIN_LAUNCH_* too", "[binary][launch]") {
  TempDir dir;
  std::ofstream(dir / "job.yaml") << "launch:\n  nproc: 3\n  run_id: from-yaml\n";
  CapturedRun from_yaml = mgtrain_launch(dir, {dir / "job.yaml", "--", "sh", "-c", "echo $LOCAL_WORLD_SIZE"});
  INFO(from_yaml.err);
  CHECK(from_yaml.exit_code == 0);
  CHECK_THAT(from_yaml.out, Catch::Contains("[rank 2] 3\n"));
  CHECK(file_exists(dir / "runs/from-yaml/attempt_0/rank_2/stdout.log"));

  CaptureOptions options;
  options.set_env = {{"MGTRAIN_LAUNCH_NPROC", "2"}, {"MGTRAIN_LAUNCH_RUN_ID", "from-env"}};
  CapturedRun from_env = mgtrain_launch(dir, {"--", "sh", "-c", "echo $WORLD_SIZE"}, options);
  CHECK(from_env.exit_code == 0);
  CHECK_THAT(from_env.out, Catch::Contains("[rank 1] 2\n"));
}

TEST_CASE("a busy --master-port exits 2 before any worker starts", "[binary][launch]") {
  TempDir dir;
  int port_number = 0;
  int fd = listening_socket(port_number);
  std::string port = std::to_string(port_number);
  CapturedRun run = mgtrain_launch(dir, {"--nproc", "2", "--master-port", port, "--", "touch", dir / "started"});
  close(fd);
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.err, Catch::Contains("master_port " + port + " is already in use"));
  CHECK_FALSE(file_exists(dir / "started"));
}
