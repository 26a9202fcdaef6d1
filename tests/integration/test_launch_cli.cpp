// End to end through the real `mgtrain` binary: `mgtrain launch [flags] -- COMMAND`, torchrun's
// flag spellings, settings from YAML and MGTRAIN_LAUNCH_* variables, exit codes and the report.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "launch_fixture.hpp"
#include "process/run_capture.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;

namespace {}  // namespace

TEST_CASE("mgtrain launch --nproc 2 -- COMMAND runs two prefixed workers", "[binary][launch]") {
  TempDir dir;
  CapturedRun run = mgtrain_launch(dir, {"--nproc", "2", "--run-id", "e2e", "--", "sh", "-c",
                                         "echo \"hello from $RANK of $WORLD_SIZE\"; echo \"err $LOCAL_RANK\" >&2"});
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.out,
             Catch::Contains("[rank 0] hello from 0 of 2\n") && Catch::Contains("[rank 1] hello from 1 of 2\n"));
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

TEST_CASE("a Python script that is not there exits 2 naming it and the folder, before any worker starts",
          "[binary][launch]") {
  TempDir dir;
  std::ofstream(dir / "train.py") << "print('hello')\n";
  CaptureOptions options;
  options.working_directory = dir.path();
  // `-- python3 FILE` and the torchrun form `launch FILE` (the interpreter is never started: sh stands in for it).
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--nproc", "2", "--", "python3", "-u", "trian.py"},
        std::vector<std::string>{"--nproc", "2", "--python", "sh", "trian.py"}}) {
    CapturedRun run = mgtrain_launch(dir, args, options);
    INFO(run.err);
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, Catch::Contains("mgtrain: error: the Python script trian.py does not exist in ") &&
                            Catch::Contains(", the workers' working directory (did you mean train.py?)"));
    CHECK_FALSE(file_exists(dir / "runs"));  // nothing started, no run folder
  }
}

TEST_CASE("torchrun's --role, --run-path and a literal -- among the script's arguments", "[binary][launch][torchrun]") {
  TempDir dir;
  // No .py suffix: --run-path still runs it under launch.python (here sh, so no Python is needed).
  std::ofstream(dir / "script") << "echo \"$ROLE_NAME $*\" > \"" << dir / "seen"
                                << "\"\n";
  CapturedRun run =
      mgtrain_launch(dir, {"--role", "trainer", "--python", "sh", "--run-path", dir / "script", "a", "--", "b"});
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK(read_text(dir / "seen") == "trainer a -- b\n");
  CaptureOptions options;
  options.set_env = {{"PET_ROLE", "from-pet"}, {"PET_RUN_PATH", "1"}};
  CapturedRun from_env = mgtrain_launch(dir, {"--python", "sh", dir / "script"}, options);
  CHECK(from_env.exit_code == 0);
  CHECK(read_text(dir / "seen") == "from-pet \n");
}

TEST_CASE("a bad PET_ variable exits 2 naming it, before any worker starts", "[binary][launch][torchrun]") {
  TempDir dir;
  CaptureOptions options;
  options.set_env = {{"PET_NNODES", "two"}};
  CapturedRun run = mgtrain_launch(dir, {"--", "touch", dir / "started"}, options);
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.err, Catch::Contains("environment PET_NNODES=two: launch.nnodes: "));
  CHECK_FALSE(file_exists(dir / "started"));
}

TEST_CASE("two launchers configured only by PET_* variables form one world of 2",
          "[binary][launch][torchrun][multinode]") {
  TempDir dir;
  int port = 0;
  close(listening_socket(port));  // a port that was free a moment ago
  const std::string program = "echo \"$RANK $WORLD_SIZE $GROUP_RANK\" > \"" + dir.path() + "/rank.$RANK\"";
  std::vector<ChildProcess> nodes;
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<std::pair<std::string, std::string>> env = {{"PET_NNODES", "2"},
                                                                  {"PET_NODE_RANK", std::to_string(rank)},
                                                                  {"PET_MASTER_ADDR", "127.0.0.1"},
                                                                  {"PET_MASTER_PORT", std::to_string(port)},
                                                                  {"PET_NPROC_PER_NODE", "1"},
                                                                  {"PET_RDZV_ID", "pet-world"},
                                                                  {"PET_LOG_DIR", dir / "runs"}};
    nodes.push_back(
        start_process({kMgtrain, "launch", "--", "sh", "-c", program}, dir / ("node" + std::to_string(rank)), env));
  }
  for (const ChildProcess& node : nodes) {
    std::optional<int> code = wait_for_exit(node.pid, std::chrono::seconds(60));
    INFO(read_text(node.err_path));
    REQUIRE(code);
    CHECK(*code == 0);
  }
  CHECK(read_text(dir / "rank.0") == "0 2 0\n");
  CHECK(read_text(dir / "rank.1") == "1 2 1\n");
  CHECK(file_exists(dir / "runs/pet-world/node_0/config.yaml"));  // PET_RDZV_ID and PET_LOG_DIR
  CHECK(file_exists(dir / "runs/pet-world/node_1/config.yaml"));
}

TEST_CASE("rdzv-endpoint localhost:0 with nnodes 1: two jobs run at once on one host, each on its own free port",
          "[binary][launch][torchrun]") {
  TempDir dir;
  // Each worker records its MASTER_PORT, then waits until all four workers of both jobs have (so the jobs overlap).
  const std::string program = "echo $MASTER_PORT > \"" + dir.path() +
                              "/port.$JOB.$RANK\"; i=0; "
                              "while [ $(ls \"" +
                              dir.path() +
                              "\" | grep -c '^port\\.') -lt 4 ] && [ $i -lt 200 ]; do "
                              "sleep 0.05; i=$((i+1)); done; [ $i -lt 200 ]";
  std::vector<ChildProcess> jobs;
  for (const char* job : {"a", "b"}) {
    jobs.push_back(
        start_process({kMgtrain, "launch", "--log-dir", dir / "runs", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                       "localhost:0", "--nnodes", "1", "--nproc", "2", "--", "sh", "-c", program},
                      dir / (std::string("job_") + job), {{"JOB", job}}));
  }
  for (const ChildProcess& job : jobs) {
    std::optional<int> code = wait_for_exit(job.pid, std::chrono::seconds(60));
    INFO(read_text(job.err_path));
    REQUIRE(code);
    CHECK(*code == 0);
  }
  const std::string a = read_text(dir / "port.a.0"), b = read_text(dir / "port.b.0");
  CHECK(a == read_text(dir / "port.a.1"));
  CHECK(b == read_text(dir / "port.b.1"));
  CHECK(a != b);
  CHECK(a != "0\n");
  CHECK(b != "0\n");
}

TEST_CASE("launch.gpu_ids takes GPU UUIDs from a config exactly as from --gpu-ids", "[binary][launch][gpu]") {
  TempDir dir;
  const std::string uuid = "GPU-5a3c8e2f-1b2c-4d5e-8f90-123456789abc";  // used as it is: no GPU needed here
  std::ofstream(dir / "gpus.yaml") << "launch:\n  nproc: gpu\n  gpu_ids: " << uuid << ",MIG-bb\n  run_id: from-yaml\n";
  const std::vector<std::string> program = {"--", "sh", "-c", "echo \"$CUDA_VISIBLE_DEVICES\""};
  std::vector<std::string> yaml_args = {dir / "gpus.yaml"},
                           flag_args = {"--nproc", "gpu", "--gpu-ids", uuid + ",MIG-bb", "--run-id", "from-flag"};
  yaml_args.insert(yaml_args.end(), program.begin(), program.end());
  flag_args.insert(flag_args.end(), program.begin(), program.end());
  for (const auto& args : {yaml_args, flag_args}) {
    CapturedRun run = mgtrain_launch(dir, args);
    INFO(run.err);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Catch::Contains("[rank 0] " + uuid + "\n") && Catch::Contains("[rank 1] MIG-bb\n"));
  }
  // The resolved config the launcher writes (what a worker loads) keeps the list as written.
  CHECK_THAT(read_text(dir / "runs/from-yaml/config.yaml"), Catch::Contains("gpu_ids: " + uuid + ",MIG-bb\n"));
}
