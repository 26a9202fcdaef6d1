// `mgtrain launch` inside a (simulated) SLURM job, through the real binary: SLURM's variables in its
// environment and a fake `scontrol` first on PATH that logs its arguments. The summary line, settings
// taken from SLURM or given, the refusal of several launchers per node, requeue after the workers'
// exit 75 (also after SIGTERM, but not for a cancelled job), its warning when scontrol fails, and
// `mgtrain env`; and the real worker surviving SLURM's duplicated signals. The real cluster is
// tests/slurm/run_slurm_tests.sh.
#include <catch2/catch.hpp>

#include <signal.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "host/port_probe.hpp"
#include "launch_fixture.hpp"
#include "process/run_capture.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

// A fake scontrol: appends its arguments to calls.txt; `show job` prints JobState=$FAKE_JOB_STATE and
// RunTime=$FAKE_RUN_TIME of a 10-minute TimeLimit;
// `requeue` exits $FAKE_REQUEUE_EXIT with a message on stderr when that is not 0.
void write_fake_scontrol(const TempDir& dir) {
  std::filesystem::create_directories(dir / "bin");
  write_script(dir / "bin/scontrol", "echo \"$*\" >> " + (dir / "calls.txt") + R"(
case "$*" in
  *show*) echo "JobId=$4 JobName=t JobState=${FAKE_JOB_STATE:-RUNNING} Reason=None RunTime=${FAKE_RUN_TIME:-00:00:05} TimeLimit=00:10:00" ;;
  requeue*) if [ "${FAKE_REQUEUE_EXIT:-0}" != 0 ]; then echo "scontrol: error: Requested operation is presently disabled for job $2" >&2; exit "$FAKE_REQUEUE_EXIT"; fi ;;
esac)");
}

// The batch script of job 55 on one node (no job step).
std::map<std::string, std::string> job_shell_env(const TempDir& dir) {
  return {{"PATH", dir / "bin" + ":" + std::string(std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin")},
          {"SLURM_JOB_ID", "55"},
          {"SLURM_JOB_NODELIST", "localhost"},
          {"SLURM_JOB_NUM_NODES", "1"},
          {"SLURM_NNODES", "1"},
          {"SLURM_NODEID", "0"},
          {"SLURM_PROCID", "0"},
          {"SLURM_NTASKS", "1"}};
}

CapturedRun launch(const TempDir& dir, std::vector<std::string> args, std::map<std::string, std::string> env) {
  args.insert(args.begin(), {kMgtrain, "launch", "--log-dir", dir / "runs"});
  CaptureOptions options;
  options.timeout_s = 60;
  options.set_env = std::move(env);
  return run_and_capture(args, options);
}

std::string calls(const TempDir& dir) { return file_exists(dir / "calls.txt") ? read_text(dir / "calls.txt") : ""; }

}  // namespace

TEST_CASE("in a job shell: the run id is the job's, and exit 75 requeues the job", "[binary][slurm]") {
  TempDir dir;
  write_fake_scontrol(dir);
  CapturedRun run = launch(dir, {"--", "sh", "-c", "echo \"$TORCHELASTIC_RUN_ID\"; exit 75"}, job_shell_env(dir));
  INFO(run.err);
  CHECK(run.exit_code == 75);
  CHECK_THAT(run.err,
             Catch::Contains("mgtrain: SLURM job 55: one node, 1 worker (default), run id slurm-55 (SLURM_JOB_ID)\n"));
  CHECK_THAT(run.out, Catch::Contains("[rank 0] slurm-55\n"));
  CHECK(file_exists(dir / "runs/slurm-55/config.yaml"));
  CHECK_THAT(run.err,
             Catch::Contains("mgtrain: requeueing SLURM job 55 (scontrol requeue 55): it will run again and resume "
                             "from run slurm-55\n"));
  CHECK(calls(dir) == "-o show job 55\nrequeue 55\n");
}

TEST_CASE("a finished or failed job is not requeued", "[binary][slurm]") {
  TempDir dir;
  write_fake_scontrol(dir);
  CHECK(launch(dir, {"--", "true"}, job_shell_env(dir)).exit_code == 0);
  CHECK(launch(dir, {"--", "sh", "-c", "exit 3"}, job_shell_env(dir)).exit_code == 3);
  CHECK(calls(dir).empty());
}

TEST_CASE("requeue off by flag or key, and SLURM ignored with slurm: off", "[binary][slurm]") {
  TempDir dir;
  write_fake_scontrol(dir);
  CapturedRun off = launch(dir, {"--no-requeue", "--", "sh", "-c", "exit 75"}, job_shell_env(dir));
  CHECK(off.exit_code == 75);
  CHECK_THAT(off.err, Catch::Contains("mgtrain: SLURM job 55 is not requeued: launch.slurm_requeue is off\n"));
  auto env = job_shell_env(dir);
  env["MGTRAIN_LAUNCH_SLURM_REQUEUE"] = "false";
  CHECK(launch(dir, {"--", "sh", "-c", "exit 75"}, env).exit_code == 75);
  CapturedRun ignored =
      launch(dir, {"--slurm", "off", "--", "sh", "-c", "echo \"$TORCHELASTIC_RUN_ID\"; exit 75"}, job_shell_env(dir));
  CHECK(ignored.exit_code == 75);
  CHECK_THAT(ignored.err, !Catch::Contains("SLURM"));
  CHECK_THAT(ignored.out, !Catch::Contains("slurm-55"));
  CHECK(calls(dir).empty());
}

TEST_CASE("a failing scontrol requeue is a warning with its message", "[binary][slurm]") {
  TempDir dir;
  write_fake_scontrol(dir);
  auto env = job_shell_env(dir);
  env["FAKE_REQUEUE_EXIT"] = "1";
  CapturedRun run = launch(dir, {"--", "sh", "-c", "exit 75"}, env);
  CHECK(run.exit_code == 75);
  CHECK_THAT(run.err,
             Catch::Contains("mgtrain: warning: scontrol requeue 55 failed (exit code 1): scontrol: error: Requested "
                             "operation is presently disabled for job 55; submit the job again to resume\n"));
}

TEST_CASE("one launcher per node: settings from the step, explicit flags win", "[binary][slurm]") {
  TempDir dir;
  write_fake_scontrol(dir);
  auto env = job_shell_env(dir);
  env.insert({{"SLURM_STEP_ID", "0"},
              {"SLURM_STEP_NUM_NODES", "1"},
              {"SLURM_STEP_NUM_TASKS", "1"},
              {"SLURM_STEP_NODELIST", "localhost"},
              {"SLURM_GPUS_ON_NODE", "2"},
              {"SLURM_RESTART_COUNT", "1"}});
  CapturedRun run = launch(dir, {"--", "sh", "-c", "echo \"$LOCAL_RANK/$LOCAL_WORLD_SIZE\""}, env);
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.err,
             Catch::Contains("mgtrain: SLURM job 55 (restart 1): one node, 2 workers (SLURM_GPUS_ON_NODE), run id "
                             "slurm-55 (SLURM_JOB_ID)\n"));
  CHECK_THAT(run.err,
             Catch::Contains("mgtrain: SLURM_RESTART_COUNT=1: job 55 was requeued and this is a rerun of run slurm-55; "
                             "the program runs again with TORCHELASTIC_RUN_ID=slurm-55"));
  CHECK_THAT(run.out, Catch::Contains("[rank 1] 1/2\n"));

  CapturedRun given = launch(dir, {"--nproc", "1", "--run-id", "mine", "--", "true"}, env);
  CHECK(given.exit_code == 0);
  CHECK_THAT(given.err,
             Catch::Contains("mgtrain: SLURM job 55 (restart 1): one node, 1 worker (given), run id mine (given)\n"));
}

TEST_CASE("several launchers per node are refused before anything starts", "[binary][slurm][errors]") {
  TempDir dir;
  auto env = job_shell_env(dir);
  env.insert({{"SLURM_STEP_ID", "0"},
              {"SLURM_STEP_NUM_NODES", "2"},
              {"SLURM_STEP_NUM_TASKS", "8"},
              {"SLURM_STEP_NODELIST", "n[1-2]"}});
  CapturedRun run = launch(dir, {"--", "true"}, env);
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.err, Catch::StartsWith("mgtrain: error: SLURM: this srun step runs 8 tasks on 2 nodes") &&
                          Catch::Contains("srun --ntasks=2 --ntasks-per-node=1"));
}

TEST_CASE("SIGTERM: the workers' exit 75 requeues the job at its time limit, not after scancel",
          "[binary][slurm][signals]") {
  for (const std::string run_time : {"00:10:00", "00:00:05"}) {
    DYNAMIC_SECTION("run time " << run_time << " of 00:10:00") {
      TempDir dir;
      write_fake_scontrol(dir);
      auto env = job_shell_env(dir);
      env["FAKE_JOB_STATE"] = "COMPLETING";
      env["FAKE_RUN_TIME"] = run_time;
      std::vector<std::pair<std::string, std::string>> extra(env.begin(), env.end());
      // Workers that save and stop on SIGTERM, as the trainer does.
      ChildProcess launcher =
          start_process({kMgtrain, "launch", "--log-dir", dir / "runs", "--nproc", "2", "--", "sh", "-c",
                         "trap 'exit 75' TERM; touch " + dir / "up.$RANK" + "; while :; do sleep 0.05; done"},
                        dir / "launcher", extra);
      REQUIRE(wait_until([&] { return file_exists(dir / "up.0") && file_exists(dir / "up.1"); }, 20s));
      kill(launcher.pid, SIGTERM);
      CHECK(wait_for_exit(launcher.pid, 20s) == std::optional<int>(75));  // every worker saved: resumable
      const std::string err = read_text(launcher.err_path);
      INFO(err);
      if (run_time == "00:10:00") {
        CHECK(calls(dir) == "-o show job 55\nrequeue 55\n");
        CHECK_THAT(err, Catch::Contains("mgtrain: requeueing SLURM job 55"));
      } else {
        CHECK(calls(dir) == "-o show job 55\n");
        CHECK_THAT(err, Catch::Contains("mgtrain: SLURM job 55 is not requeued: SIGTERM before the time limit"));
      }
    }
  }
}

TEST_CASE("mgtrain env shows what SLURM gives and from which variable", "[binary][slurm]") {
  TempDir dir;
  auto env = job_shell_env(dir);
  env.insert({{"SLURM_STEP_ID", "0"},
              {"SLURM_STEP_NUM_NODES", "2"},
              {"SLURM_STEP_NUM_TASKS", "2"},
              {"SLURM_STEP_NODELIST", "gpu[07-08]"},
              {"SLURM_GPUS_PER_NODE", "a100:4"},
              {"MGTRAIN_LAUNCH_WORKER", "/nonexistent"}});
  env["SLURM_NODEID"] = "1";
  CaptureOptions options;
  options.set_env = env;
  options.timeout_s = 60;
  CapturedRun json = run_and_capture({kMgtrain, "env", "--json"}, options);
  INFO(json.err);
  CHECK(json.exit_code == 0);
  const nlohmann::json slurm = nlohmann::json::parse(json.out).at("slurm");
  CHECK(slurm.at("layout") == "launcher per node (srun step with one task per node)");
  CHECK(slurm.at("job_id") == 55);
  CHECK(slurm.at("restart_count") == 0);
  const nlohmann::json& settings = slurm.at("launch_settings");
  CHECK(settings.at("launch.nnodes") == nlohmann::json({{"value", 2}, {"from", "SLURM_STEP_NUM_NODES"}}));
  CHECK(settings.at("launch.master_addr") == nlohmann::json({{"value", "gpu07"}, {"from", "SLURM_STEP_NODELIST"}}));
  CHECK(settings.at("launch.master_port") == nlohmann::json({{"value", 20055}, {"from", "SLURM_JOB_ID"}}));
  CHECK(settings.at("launch.nproc") == nlohmann::json({{"value", 4}, {"from", "SLURM_GPUS_PER_NODE"}}));
  CapturedRun text = run_and_capture({kMgtrain, "env"}, options);
  CHECK_THAT(text.out, Catch::Contains("launch.node_rank: {value: 1, from: SLURM_NODEID}"));
  options.set_env = {{"MGTRAIN_LAUNCH_WORKER", "/nonexistent"}};
  CHECK(nlohmann::json::parse(run_and_capture({kMgtrain, "env", "--json"}, options).out).at("slurm") ==
        nlohmann::json({{"layout", "not inside a SLURM job"}}));
}

TEST_CASE("SLURM signals every process of the step and the launcher forwards too: the workers still save and exit 75",
          "[binary][slurm][signals][worker]") {
  const std::string worker = std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker";
  if (access(worker.c_str(), X_OK) != 0) {
    WARN("SKIP: no mgtrain-worker in " MGTRAIN_BIN_DIR " (built without LibTorch)");
    return;
  }
  TempDir dir;
  std::ofstream(dir / "job.yaml")
      << "model: {type: mlp, hidden_sizes: [64]}\n"
         "data: {dataset: synthetic, input_shape: [32], num_classes: 4, synthetic_samples: 200000, loader_threads: 0}\n"
         "train: {epochs: 1, batch_size: 8, eval_at_epoch_end: false}\n"
         "checkpoint: {every_epochs: 0, at_end: false}\nlog: {every_steps: 10}\n";
  ChildProcess launcher = start_process({kMgtrain, "launch", "--log-dir", dir / "runs", "--run-id", "dup", "--nproc",
                                         "2", "--grace-period", "20", dir / "job.yaml"},
                                        dir / "launcher");
  REQUIRE(wait_until([&] { return read_text(launcher.out_path).find("mgtrain: step 20/") != std::string::npos; }, 60s));
  // Like slurmstepd: the signal to the launcher and straight to every worker, again and again, also while they
  // save and exit.
  std::optional<int> code;
  for (int round = 0; round < 200 && !code; ++round) {
    for (pid_t pid : live_job_processes({}, dir.path())) kill(pid, SIGUSR1);
    code = wait_for_exit(launcher.pid, 10ms);
  }
  if (!code) code = wait_for_exit(launcher.pid, 60s);
  INFO(read_text(launcher.err_path));
  CHECK(code == std::optional<int>(75));
  CHECK_THAT(read_text(launcher.err_path), !Catch::Contains("job failed"));
}

TEST_CASE("two nodes at the time limit: SIGTERM on both, the workers exit 75, node 0 requeues the job once",
          "[binary][slurm][signals][multinode]") {
  TempDir dir;
  write_fake_scontrol(dir);
  const std::string port = std::to_string(SocketPortProbe().pick_free_port());
  auto node_env = [&](int node) {
    auto env = job_shell_env(dir);
    env["SLURM_NNODES"] = env["SLURM_JOB_NUM_NODES"] = "2";
    env["SLURM_JOB_NODELIST"] = "localhost,localhost";
    env["SLURM_NODEID"] = env["SLURM_PROCID"] = std::to_string(node);
    env["SLURM_NTASKS"] = "2";
    env.insert({{"SLURM_STEP_ID", "0"},
                {"SLURM_STEP_NUM_NODES", "2"},
                {"SLURM_STEP_NUM_TASKS", "2"},
                {"SLURM_STEP_NODELIST", "localhost,localhost"},
                {"SLURM_LOCALID", "0"},
                {"SLURM_NTASKS_PER_NODE", "1"},
                {"FAKE_JOB_STATE", "COMPLETING"},
                {"FAKE_RUN_TIME", "00:10:00"}});
    return std::vector<std::pair<std::string, std::string>>(env.begin(), env.end());
  };
  // Workers that save and stop on SIGTERM, as the trainer does; settings from SLURM, the port given (free here).
  auto start_node = [&](int node) {
    return start_process(
        {kMgtrain, "launch", "--log-dir", dir / "runs", "--master-port", port, "--nproc", "1", "--", "sh", "-c",
         "trap 'exit 75' TERM; touch " + dir / "up.$RANK" + "; while :; do sleep 0.05; done"},
        dir / ("node" + std::to_string(node)), node_env(node));
  };
  ChildProcess node0 = start_node(0);
  ChildProcess node1 = start_node(1);
  REQUIRE(wait_until([&] { return file_exists(dir / "up.0") && file_exists(dir / "up.1"); }, 30s));
  kill(node1.pid, SIGTERM);  // slurmstepd signals every node at about the same time, in no set order
  kill(node0.pid, SIGTERM);
  // 75: a node stopped by SIGTERM whose workers all saved (docs/exit-codes.md); 143 only where the other node's
  // leaving (with 143) reached a node before its own SIGTERM did.
  for (pid_t node : {node0.pid, node1.pid}) {
    const std::optional<int> code = wait_for_exit(node, 30s);
    CHECK((code == std::optional<int>(75) || code == std::optional<int>(143)));
  }
  const std::string err0 = read_text(node0.err_path);
  INFO(err0);
  INFO(read_text(node1.err_path));
  CHECK(calls(dir) == "-o show job 55\nrequeue 55\n");  // node 0 only, once
  CHECK_THAT(err0, Catch::Contains("mgtrain: requeueing SLURM job 55"));
}
