// `mgtrain launch` as a torchrun 2.x drop-in, through the real binary: the workers' environment against torch
// 2.15's torchrun, torch's file timer, the launcher's TORCHELASTIC_ERROR_FILE, the interpreter for .py scripts,
// and the log directory when the current directory is read-only.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "integration/launch_fixture.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

std::string torch_venv() {
  return MGTRAIN_TORCH2_VENV;  // tests/CMakeLists.txt: scripts/torch2-env.sh's venv
}

// A python that imports torch.distributed.elastic.timer: the torch 2.15 venv's, else Debian's python3-torch.
std::string torch_python() {
  for (const std::string& python : {torch_venv() + "/bin/python", std::string("/usr/bin/python3")}) {
    if (std::system((python + " -c 'import torch.distributed.elastic.timer' >/dev/null 2>&1").c_str()) == 0)
      return python;
  }
  return "";
}

struct Run {
  int exit_code = -1;
  std::string out, err;
};

// Runs `argv` in `cwd` with `env` added, up to 60 s.
Run run_in(const TempDir& dir, const std::string& cwd, const std::vector<std::string>& argv,
           const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> command = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", cwd};
  command.insert(command.end(), argv.begin(), argv.end());
  static int counter = 0;
  ChildProcess child = start_process(command, dir / ("console" + std::to_string(counter++)), env);
  Run run;
  run.exit_code = wait_for_exit(child.pid, 60s).value_or(-1);
  run.out = read_text(child.out_path);
  run.err = read_text(child.err_path);
  return run;
}

std::map<std::string, std::string> read_env_file(const std::string& path) {
  std::map<std::string, std::string> env;
  for (const std::string& line : mgtrain::split_lines(read_text(path))) {
    const std::size_t equals = line.find('=');
    if (equals != std::string::npos && equals > 0) env[line.substr(0, equals)] = line.substr(equals + 1);
  }
  return env;
}

}  // namespace

TEST_CASE("workers get the variables torch 2.15's torchrun sets, with the same values where they must match",
          "[torchrun_env]") {
  const std::string torchrun = torch_venv() + "/bin/torchrun";
  if (access(torchrun.c_str(), X_OK) != 0) {
    WARN("skipped: no torch 2.15 venv at " + torch_venv() + " (scripts/torch2-env.sh creates it)");
    return;
  }
  TempDir dir;
  std::filesystem::create_directories(dir / "torch");
  std::filesystem::create_directories(dir / "mg");
  const std::vector<std::string> program = {"sh", "-c", "env > out.$RANK"};
  std::vector<std::string> torch_argv = {torchrun, "--nproc-per-node", "2", "--no-python"};
  torch_argv.insert(torch_argv.end(), program.begin(), program.end());
  Run torch_run = run_in(dir, dir / "torch", torch_argv);
  REQUIRE(torch_run.exit_code == 0);
  std::vector<std::string> mg_argv = {kMgtrain, "launch", "--nproc", "2", "--log-dir", dir / "runs", "--"};
  mg_argv.insert(mg_argv.end(), program.begin(), program.end());
  Run mg_run = run_in(dir, dir / "mg", mg_argv);
  INFO(mg_run.err);
  REQUIRE(mg_run.exit_code == 0);

  for (const char* rank : {"0", "1"}) {
    const auto expected = read_env_file(dir / (std::string("torch/out.") + rank));
    const auto actual = read_env_file(dir / (std::string("mg/out.") + rank));
    for (const auto& [name, value] : expected) {
      INFO("rank " << rank << ": " << name << "=" << value);
      CHECK(actual.count(name) == 1);
    }
    // Equal values; the rest differ by design (docs/launch.md): MASTER_ADDR/PORT, run id, error file path,
    // TORCHELASTIC_USE_AGENT_STORE (torchrun's agent hosts the store, mgtrain's rank 0 does).
    for (const char* name :
         {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
          "ROLE_NAME", "ROLE_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
          "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS", "TORCHELASTIC_SIGNALS_TO_HANDLE"}) {
      INFO("rank " << rank << ": " << name);
      REQUIRE(expected.count(name) == 1);
      CHECK(actual.count(name) == 1);
      if (actual.count(name)) CHECK(actual.at(name) == expected.at(name));
    }
    CHECK(actual.at("TORCHELASTIC_USE_AGENT_STORE") == "False");
  }
}

TEST_CASE("an expired file timer: the launcher kills the worker and reports the timer, and a released one exits 0",
          "[file_timer]") {
  const std::string python = torch_python();
  if (python.empty()) {
    WARN("skipped: neither the torch 2.15 venv nor /usr/bin/python3 imports torch.distributed.elastic.timer");
    return;
  }
  TempDir dir;
  const std::string program = dir / "timer.py";
  write_script(program, "");  // overwritten below: the python program
  {
    std::ofstream(program) << R"(import os, sys, time
from torch.distributed.elastic.timer import FileTimerClient, configure, expires
configure(FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
with expires(after=float(sys.argv[1]), scope="step"):
    time.sleep(float(sys.argv[2]))
print("released", flush=True)
)";
  }
  const std::vector<std::pair<std::string, std::string>> env = {
      {"TORCHELASTIC_ENABLE_FILE_TIMER", "1"},
      {"TORCHELASTIC_TIMER_FILE", dir / "timer.fifo"},
      {"TORCHELASTIC_ERROR_FILE", dir / "launcher_error.json"}};
  const auto started = std::chrono::steady_clock::now();
  Run killed = run_in(dir, dir.path(),
                      {kMgtrain, "launch", "--nproc", "1", "--log-dir", dir / "runs", "--run-id", "late", "--", python,
                       program, "1", "60"},
                      env);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO(killed.err);
  CHECK(killed.exit_code == 137);
  CHECK(took < 40);  // torch's import takes a few seconds; the sleep is 60 s
  CHECK_THAT(killed.err, Catch::Contains("file timer \"step\" expired; sending it SIGKILL"));
  CHECK_THAT(killed.err,
             Catch::Contains("failure    signal SIGKILL (9), sent by the launcher: file timer \"step\" expired"));
  nlohmann::json report = nlohmann::json::parse(read_text(dir / "runs/late/failure.json"));
  CHECK(report["root_cause"]["expired_timer"]["scope_id"] == "step");
  CHECK(report["root_cause"]["expired_timer"]["pid"] == report["root_cause"]["pid"]);
  nlohmann::json launcher_error = nlohmann::json::parse(read_text(dir / "launcher_error.json"));
  CHECK(launcher_error["message"]["errorCode"] == -9);
  CHECK_THAT(launcher_error["message"]["message"].get<std::string>(), Catch::Contains("file timer \"step\" expired"));
  CHECK(!file_exists(dir / "timer.fifo"));  // the launcher created the pipe and removed it

  // The torchrun personality: torch's FileTimerServer then sends the timer's signal to torchrun itself, which dies by
  // it (137) and leaves its other workers running; mgtrain stops them first.
  Run personality = run_in(dir, dir.path(),
                           {kMgtrain, "torchrun", "--nproc-per-node", "2", "--log-dir", dir / "runs", "--rdzv-id",
                            "late-torchrun", "--no-python", python, program, "1", "60"},
                           env);
  INFO(personality.err);
  CHECK(personality.exit_code == 137);
  CHECK_THAT(personality.err, Catch::Contains("the launcher ends by SIGKILL as torchrun does"));
  CHECK(!file_exists(dir / "timer.fifo"));

  Run in_time = run_in(dir, dir.path(),
                       {kMgtrain, "launch", "--nproc", "2", "--log-dir", dir / "runs", "--run-id", "ok", "--", python,
                        program, "30", "0.2"},
                       env);
  INFO(in_time.err);
  CHECK(in_time.exit_code == 0);
  CHECK_THAT(in_time.out, Catch::Contains("[rank 0] released") && Catch::Contains("[rank 1] released"));
  CHECK_THAT(in_time.err, !Catch::Contains("file timer"));
}

TEST_CASE("a .py script runs under PYTHON_EXEC, and a missing torch is blamed on that interpreter", "[python]") {
  TempDir dir;
  // A stand-in interpreter: records that it ran, then fails like a python without torch.
  const std::string wrapper = write_script(dir / "fake-python",
                                           "echo \"ran $*\" >> \"$(dirname \"$0\")/ran.txt\"\n"
                                           "echo \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n");
  std::ofstream(dir / "train.py") << "import torch\n";
  Run run =
      run_in(dir, dir.path(),
             {kMgtrain, "launch", "--nproc", "1", "--log-dir", dir / "runs", "--run-id", "py", "train.py", "--lr", "1"},
             {{"PYTHON_EXEC", wrapper}});
  INFO(run.err);
  CHECK(run.exit_code == 1);
  CHECK_THAT(read_text(dir / "ran.txt"), Catch::Contains("ran -u train.py --lr 1"));
  CHECK_THAT(run.err,
             Catch::Contains("hint       the interpreter " + wrapper + " (chosen by PYTHON_EXEC) cannot import torch"));

  // --python wins over PYTHON_EXEC; a name not on PATH is refused before anything starts.
  Run missing = run_in(dir, dir.path(),
                       {kMgtrain, "launch", "--log-dir", dir / "runs", "--python", "no-such-python-3", "train.py"},
                       {{"PYTHON_EXEC", wrapper}});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err,
             Catch::Contains("cannot find the Python interpreter \"no-such-python-3\" (chosen by launch.python ("));
}

TEST_CASE("without --log-dir in a read-only directory, runs go to the temp directory", "[log_dir]") {
  if (std::system("unshare -m true >/dev/null 2>&1") != 0) {
    WARN("skipped: cannot make a private mount namespace (unshare -m needs root)");
    return;
  }
  TempDir dir;
  std::filesystem::create_directories(dir / "ro");
  std::filesystem::create_directories(dir / "tmp");
  // A read-only bind mount of the directory in a private mount namespace: read-only even for root.
  const std::string script =
      "mount --bind \"$1\" \"$1\" && mount -o remount,bind,ro \"$1\" && cd \"$1\" && "
      "TMPDIR=\"$2\" exec \"$3\" launch --nproc 1 --run-id ro -- sh -c 'echo hello'";
  Run run = run_in(
      dir, dir.path(),
      {"unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", dir / "ro", dir / "tmp", kMgtrain});
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains("hello"));
  CHECK_THAT(run.err, Catch::Contains("the current directory is not writable: logs go to " + (dir / "tmp/mgtrain-")));
  bool found = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "tmp")) {
    found = found || file_exists(entry.path().string() + "/runs/ro/attempt_0/rank_0/stdout.log");
  }
  CHECK(found);
  CHECK(!file_exists(dir / "ro/runs"));
}

TEST_CASE("multi-node: each node agent writes its TORCHELASTIC_ERROR_FILE with the job's root cause",
          "[error_file][multinode]") {
  TempDir dir;
  int port = 0;
  close(listening_socket(port));  // a port that was free a moment ago
  std::vector<ChildProcess> nodes;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string node = "node" + std::to_string(rank);
    nodes.push_back(start_process({kMgtrain,
                                   "launch",
                                   "--nnodes",
                                   "2",
                                   "--node-rank",
                                   std::to_string(rank),
                                   "--master-addr",
                                   "127.0.0.1",
                                   "--master-port",
                                   std::to_string(port),
                                   "--nproc",
                                   "1",
                                   "--run-id",
                                   "errs",
                                   "--log-dir",
                                   dir / "runs",
                                   "--grace-period",
                                   "1",
                                   "--",
                                   "sh",
                                   "-c",
                                   "if [ \"$RANK\" = 1 ]; then echo broken >&2; exit 3; fi; sleep 30"},
                                  dir / node, {{"TORCHELASTIC_ERROR_FILE", dir / (node + "_error.json")}}));
  }
  for (const ChildProcess& node : nodes) {
    std::optional<int> code = wait_for_exit(node.pid, 60s);
    INFO(read_text(node.err_path));
    REQUIRE(code);
    CHECK(*code == 3);
  }
  for (const char* node : {"node0", "node1"}) {
    INFO(node);
    REQUIRE(file_exists(dir / (std::string(node) + "_error.json")));
    nlohmann::json error = nlohmann::json::parse(read_text(dir / (std::string(node) + "_error.json")));
    CHECK(error["message"]["errorCode"] == 3);
    CHECK_THAT(error["message"]["message"].get<std::string>(),
               Catch::Contains(": 1 (local_rank: 0)") && Catch::Contains("exitcode  : 3"));
  }
}
