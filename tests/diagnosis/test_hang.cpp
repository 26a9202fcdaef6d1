// Hang detection as real processes (docs/diagnosis.md): the real `mgtrain launch --hang-timeout` with workers that
// report progress through MGTRAIN_HEARTBEAT_FILE and wait for each other at a file barrier (a collective). One rank
// stops (SIGSTOP from the test, or stuck in a function while the others wait): that rank is named hung, the others
// waiting, the detection line is on the console before any worker gets SIGTERM, within the hang timeout + slack,
// and the launcher exits 124. A program that never reports is told so once and left alone. The built-in trainer
// case needs mgtrain-worker (the torch build) and is skipped without it.
#include <catch2/catch.hpp>

#include <signal.h>

#include <yaml-cpp/yaml.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "integration/launch_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kHangTimeoutS = 2.0;
// Detection is due hang-timeout after the stalled rank's last report; this is what scheduling on a busy machine may
// add (the launcher's loop, the workers' 50 ms steps).
constexpr double kSlackS = 2.0;

// A shell worker: each step is a file barrier among the ranks, then a progress report (the step count). Its
// SIGTERM trap records whether the launcher had printed the detection line by then.
constexpr const char* kShellWorker = R"(
echo $$ > "$MGTRAIN_RUN_DIR/pid_$RANK"
trap 'if grep -q " hung: " "$LAUNCHER_ERR"; then echo after; else echo before; fi > "$MGTRAIN_RUN_DIR/term_$RANK"; exit 143' TERM
step=0
while :; do
  step=$((step+1))
  echo $step > "$MGTRAIN_RUN_DIR/at_$RANK.tmp" && mv "$MGTRAIN_RUN_DIR/at_$RANK.tmp" "$MGTRAIN_RUN_DIR/at_$RANK"
  r=0
  while [ $r -lt $WORLD_SIZE ]; do
    at=0; read at < "$MGTRAIN_RUN_DIR/at_$r" 2>/dev/null
    if [ "${at:-0}" -ge $step ]; then r=$((r+1)); else sleep 0.01; fi
  done
  echo $step > "$MGTRAIN_HEARTBEAT_FILE"
  sleep 0.05
done
)";

// The same in Python with the shipped helper (share/mgtrain/python/mgtrain_progress.py); the last rank gets stuck
// in stuck_here() at step 15, before reporting it, while the others report 15 and wait for it at step 16.
constexpr const char* kPythonWorker = R"(
import os, signal, sys, time
sys.path.insert(0, os.environ["HELPER_DIR"])
from mgtrain_progress import progress

run, rank, world = os.environ["MGTRAIN_RUN_DIR"], int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

def on_term(signum, frame):
    with open(os.environ["LAUNCHER_ERR"]) as err:
        seen = " hung: " in err.read()
    with open(f"{run}/term_{rank}", "w") as out:
        out.write("after\n" if seen else "before\n")
    sys.exit(143)

signal.signal(signal.SIGTERM, on_term)

def arrive(step):
    with open(f"{run}/at_{rank}.tmp", "w") as out:
        out.write(str(step))
    os.replace(f"{run}/at_{rank}.tmp", f"{run}/at_{rank}")
    for other in range(world):
        while True:
            try:
                with open(f"{run}/at_{other}") as at:
                    if int(at.read() or 0) >= step:
                        break
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.01)

def stuck_here():
    while True:
        time.sleep(0.05)

step = 0
while True:
    step += 1
    arrive(step)
    if rank == world - 1 and step == 15:
        stuck_here()
    progress(step)
    time.sleep(0.05)
)";

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

std::optional<double> seconds_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const Clock::time_point start = Clock::now();
  if (!wait_until(condition, timeout)) return std::nullopt;
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct HangRun {
  ChildProcess launcher;
  std::string run_dir;
};

HangRun start_hang_run(const TempDir& dir, int nproc, const std::vector<std::string>& command,
                       const std::string& grace_period = "2") {
  HangRun run;
  run.run_dir = dir / "runs/hang";
  std::vector<std::string> argv = {kMgtrain,         "launch",     "--nproc",    std::to_string(nproc), "--run-id",
                                   "hang",           "--log-dir",  dir / "runs", "--hang-timeout",      "2",
                                   "--grace-period", grace_period, "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  const std::string prefix = dir / "launcher";
  run.launcher = start_process(
      argv, prefix,
      {{"LAUNCHER_ERR", prefix + ".err"}, {"HELPER_DIR", std::string(MGTRAIN_SOURCE_DIR) + "/share/mgtrain/python"}});
  return run;
}

// Every rank of attempt 0 has reported `step` or more.
bool all_reported(const std::string& run_dir, int nproc, int step) {
  for (int rank = 0; rank < nproc; ++rank) {
    std::ifstream in(run_dir + "/attempt_0/rank_" + std::to_string(rank) + "/heartbeat");
    long value = -1;
    if (!(in >> value) || value < step) return false;
  }
  return true;
}

void check_hung_and_waiting(const HangRun& run, int hung_rank, const std::vector<int>& waiting) {
  YAML::Node report = YAML::Load(read_text(run.run_dir + "/failure.json"));
  INFO(read_text(run.run_dir + "/failure.json"));
  CHECK(report["exit_code"].as<int>() == 124);
  CHECK(report["root_cause"]["global_rank"].as<int>() == hung_rank);
  CHECK(report["root_cause"]["hung"].as<bool>());
  CHECK(report["root_cause"]["silent_s"].as<double>() >= kHangTimeoutS * 0.9);
  CHECK(report["root_cause"]["last_step"].as<long>() > 0);
  CHECK_FALSE(report["root_cause"]["last_progress_time"].IsNull());
  // Every rank's stacks were taken before any was stopped; the root cause's top frames are in the report.
  CHECK(report["root_cause"]["stacks"].as<std::string>() ==
        run.run_dir + "/attempt_0/rank_" + std::to_string(hung_rank) + "/stacks.txt");
  CHECK(report["root_cause"]["top_frames"].size() >= 1);
  for (int rank = 0; rank <= static_cast<int>(waiting.size()); ++rank) {
    CHECK(std::filesystem::exists(run.run_dir + "/attempt_0/rank_" + std::to_string(rank) + "/stacks.txt"));
  }
  std::vector<int> named;
  for (const YAML::Node& other : report["other_failures"]) {
    if (other["waiting"].as<bool>()) named.push_back(other["global_rank"].as<int>());
    CHECK_FALSE(other["hung"].as<bool>());
  }
  std::sort(named.begin(), named.end());
  CHECK(named == waiting);
}

}  // namespace

TEST_CASE("a rank frozen with SIGSTOP is named hung, the ranks waiting for it are not", "[diagnosis][hang]") {
  TempDir dir;
  const std::string worker = write_script(dir / "worker.sh", kShellWorker);
  HangRun run = start_hang_run(dir, 3, {"/bin/sh", worker});
  REQUIRE(wait_until([&] { return all_reported(run.run_dir, 3, 5); }, 20s));
  const pid_t frozen = std::stoi(read_text(run.run_dir + "/pid_1"));
  REQUIRE(kill(frozen, SIGSTOP) == 0);
  std::optional<double> detected =
      seconds_until([&] { return read_text(run.launcher.err_path).find(" hung: ") != std::string::npos; },
                    std::chrono::milliseconds(static_cast<int>((kHangTimeoutS + 10) * 1000)));
  std::optional<int> code = wait_for_exit(run.launcher.pid, 20s);
  const std::string err = read_text(run.launcher.err_path);
  INFO(err);
  REQUIRE(detected);
  CHECK(*detected >= kHangTimeoutS - 0.5);  // rank 1 reported last at most a step before it was stopped
  CHECK(*detected <= kHangTimeoutS + kSlackS);
  REQUIRE(code);
  CHECK(*code == 124);
  CHECK_THAT(err, Contains("rank 1 hung: no progress for") && Contains("its process is stopped") &&
                      Contains("ranks 0, 2 waiting since") && Contains("stopping the workers"));
  CHECK_THAT(err, Contains("failure    hung: no progress for") && Contains("its process stopped (SIGSTOP)"));
  // The waiting ranks got SIGTERM after the line was out (the frozen one cannot run its trap).
  for (int rank : {0, 2}) CHECK(read_text(run.run_dir + "/term_" + std::to_string(rank)) == "after\n");
  check_hung_and_waiting(run, 1, {0, 2});
}

TEST_CASE("a rank frozen with SIGSTOP is killed once its stacks are taken: the stop does not wait out the grace period",
          "[diagnosis][hang]") {
  TempDir dir;
  const std::string worker = write_script(dir / "worker.sh", kShellWorker);
  // A grace period no test waits for: the job can end in time only because the frozen rank is SIGKILLed at once.
  HangRun run = start_hang_run(dir, 2, {"/bin/sh", worker}, "600");
  REQUIRE(wait_until([&] { return all_reported(run.run_dir, 2, 5); }, 20s));
  const pid_t frozen = std::stoi(read_text(run.run_dir + "/pid_1"));
  REQUIRE(kill(frozen, SIGSTOP) == 0);
  const std::optional<int> code = wait_for_exit(run.launcher.pid, 90s);
  if (!code) {
    kill(run.launcher.pid, SIGKILL);
    kill(-frozen, SIGKILL);
  }
  const std::string err = read_text(run.launcher.err_path);
  INFO(err);
  REQUIRE(code);
  CHECK(*code == 124);
  CHECK_THAT(err, Contains("rank 1 hung: no progress for") && Contains("its process is stopped"));
  CHECK_THAT(err,
             Contains("mgtrain: rank 1 (pid " + std::to_string(frozen) +
                      ") is stopped (SIGSTOP or a debugger) and cannot act on the stop: killing it now (SIGKILL)"));
  CHECK(err.find("killing it now") < err.find("Root cause"));
  CHECK(std::filesystem::exists(run.run_dir + "/attempt_0/rank_1/stacks.txt"));  // taken before the kill
  CHECK(read_text(run.run_dir + "/term_0") == "after\n");                        // rank 0 stopped by SIGTERM as usual
}

TEST_CASE("a rank stuck in a function while the others wait for it is named hung (Python helper)",
          "[diagnosis][hang]") {
  if (std::system("python3 -c 'import os' >/dev/null 2>&1") != 0) {
    WARN("skipped: no python3");
    return;
  }
  TempDir dir;
  const std::string worker = write_file(dir / "worker.py", kPythonWorker);
  HangRun run = start_hang_run(dir, 3, {"python3", worker});
  // Ranks 0 and 1 report step 15 and wait; rank 2 reported 14 and is stuck: detection is due 2 s after that.
  REQUIRE(wait_until([&] { return all_reported(run.run_dir, 3, 14); }, 30s));
  std::optional<double> detected =
      seconds_until([&] { return read_text(run.launcher.err_path).find(" hung: ") != std::string::npos; },
                    std::chrono::milliseconds(static_cast<int>((kHangTimeoutS + 10) * 1000)));
  std::optional<int> code = wait_for_exit(run.launcher.pid, 20s);
  const std::string err = read_text(run.launcher.err_path);
  INFO(err);
  REQUIRE(detected);
  CHECK(*detected <= kHangTimeoutS + kSlackS);
  REQUIRE(code);
  CHECK(*code == 124);
  CHECK_THAT(err, Contains("rank 2 hung: no progress for") && Contains("(last step 14 at ") &&
                      Contains("ranks 0, 1 waiting since"));
  for (int rank : {0, 1, 2}) CHECK(read_text(run.run_dir + "/term_" + std::to_string(rank)) == "after\n");
  check_hung_and_waiting(run, 2, {0, 1});
  YAML::Node report = YAML::Load(read_text(run.run_dir + "/failure.json"));
  CHECK(report["root_cause"]["last_step"].as<long>() == 14);
  // The stuck rank's stacks name the function it is stuck in, through Python's faulthandler.
  CHECK_THAT(read_text(run.run_dir + "/attempt_0/rank_2/stacks.txt"), Contains("stuck_here"));
  CHECK_THAT(report["root_cause"]["top_frames"][0].as<std::string>(), Contains("stuck_here"));
  CHECK_THAT(err, Contains("frames     ") && Contains("stuck_here"));
  for (const YAML::Node& other : report["other_failures"]) {
    if (other["waiting"].as<bool>()) CHECK(other["last_step"].as<long>() == 15);
  }
}

TEST_CASE("a program that never reports progress is told so once and left alone", "[diagnosis][hang]") {
  TempDir dir;
  const std::string worker = write_script(dir / "worker.sh",
                                          "if [ \"$RANK\" = 0 ]; then i=0; while [ $i -lt 30 ]; do echo $i > "
                                          "\"$MGTRAIN_HEARTBEAT_FILE\"; sleep 0.1; i=$((i+1)); done; exit 0; fi\n"
                                          "sleep 3  # no report: never judged");
  CapturedRun run = mgtrain_launch(dir, {"--nproc", "2", "--hang-timeout", "1", "--", "/bin/sh", worker});
  INFO(run.err);
  CHECK(run.exit_code == 0);
  const std::string notice = "rank 1 has reported no progress yet: hang detection for it starts at its first report";
  CHECK_THAT(run.err, Contains(notice));
  CHECK(run.err.find(notice) == run.err.rfind(notice));  // once
  CHECK(run.err.find("rank 0 has reported no progress yet") == std::string::npos);
}

TEST_CASE("the old spelling --heartbeat-timeout still works, the old config key names the new one",
          "[diagnosis][hang]") {
  TempDir dir;
  const std::string worker = write_script(dir / "worker.sh", "touch \"$MGTRAIN_HEARTBEAT_FILE\"; sleep 30");
  CapturedRun old_flag = mgtrain_launch(dir, {"--nproc", "1", "--heartbeat-timeout", "0.5", "--", "/bin/sh", worker});
  INFO(old_flag.err);
  CHECK(old_flag.exit_code == 124);
  CHECK_THAT(old_flag.err, Contains("rank 0 hung: no progress for"));
  CapturedRun old_key = run_and_capture({kMgtrain, "config", "show", "--set", "launch.heartbeat_timeout=5"});
  CHECK(old_key.exit_code == 2);
  CHECK_THAT(old_key.err, Contains("launch.heartbeat_timeout: unknown key (renamed: launch.hang_timeout)"));
}

namespace {

bool worker_built() {
  if (std::filesystem::exists(std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker")) return true;
  WARN("skipped: mgtrain-worker is not built (the torch build runs this case)");
  return false;
}

// The built-in trainer, 2 ranks over gloo, training without end under --hang-timeout `timeout`.
HangRun start_trainer_run(const TempDir& dir, const std::string& timeout,
                          const std::vector<std::pair<std::string, std::string>>& environment) {
  HangRun run;
  run.run_dir = dir / "runs/hang";
  run.launcher = start_process(
      {kMgtrain, "launch", "--nproc", "2", "--run-id", "hang", "--log-dir", dir / "runs", "--hang-timeout", timeout,
       "--grace-period", "2", std::string(MGTRAIN_SOURCE_DIR) + "/configs/bench/mlp-64.yaml", "train.max_steps=0",
       "train.epochs=1000000", "data.synthetic_samples=4096"},
      dir / "launcher", environment);
  return run;
}

}  // namespace

// Needs the torch build (mgtrain-worker next to mgtrain): the built-in trainer over gloo, 2 ranks, rank 1 frozen.
// Rank 0 then waits in the next all-reduce and its heartbeat stops too; the old watchdog named rank 0.
TEST_CASE("built-in trainer: a rank frozen with SIGSTOP is the one named hung", "[diagnosis][hang][torch]") {
  if (!worker_built()) return;
  TempDir dir;
  HangRun run = start_trainer_run(dir, "5", {});
  // Both ranks are training: their heartbeat lines report steps.
  const auto step_of = [&](int rank) -> long {
    const std::string text = read_text(run.run_dir + "/attempt_0/rank_" + std::to_string(rank) + "/heartbeat");
    const std::size_t at = text.find("\"step\":");
    return at == std::string::npos ? -1 : std::atol(text.c_str() + at + 7);
  };
  REQUIRE(wait_until([&] { return step_of(0) > 20 && step_of(1) > 20; }, 60s));
  pid_t frozen = -1;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream environ(entry.path() / "environ");
    std::string variables((std::istreambuf_iterator<char>(environ)), std::istreambuf_iterator<char>());
    if (variables.find(std::string("MGTRAIN_RUN_DIR=") + run.run_dir) != std::string::npos &&
        variables.find(std::string("RANK=1") + '\0') != std::string::npos &&
        read_text(entry.path() / "cmdline").find("mgtrain-worker") != std::string::npos) {
      frozen = std::stoi(name);
    }
  }
  REQUIRE(frozen > 0);
  REQUIRE(kill(frozen, SIGSTOP) == 0);
  std::optional<double> detected =
      seconds_until([&] { return read_text(run.launcher.err_path).find(" hung: ") != std::string::npos; }, 20s);
  std::optional<int> code = wait_for_exit(run.launcher.pid, 30s);
  const std::string err = read_text(run.launcher.err_path);
  INFO(err);
  REQUIRE(detected);
  CHECK(*detected <= 5 + kSlackS);
  REQUIRE(code);
  CHECK(*code == 124);
  CHECK_THAT(err, Contains("rank 1 hung: no progress for") && Contains("rank 0 waiting since"));
  check_hung_and_waiting(run, 1, {0});
  // The rank that waits was dumped before it was stopped: its native stacks name the trainer's functions.
  CHECK_THAT(read_text(run.run_dir + "/attempt_0/rank_0/stacks.txt"), Contains("mgtrain::"));
}

// Needs the torch build. The built-in trainer's test hook (MGTRAIN_TEST_HANG_AT) blocks rank 1 after step 300 outside
// any collective; rank 0 reports the same step and waits in the next all-reduce. Progress cannot tell them apart:
// the stacks do, and the report names rank 1 with the hook's frame.
TEST_CASE("built-in trainer: a rank hung by the test hook is named by its stacks", "[diagnosis][hang][torch]") {
  if (!worker_built()) return;
  TempDir dir;
  HangRun run = start_trainer_run(dir, "4", {{"MGTRAIN_TEST_HANG_AT", "1:300"}});
  std::optional<int> code = wait_for_exit(run.launcher.pid, 90s);
  const std::string err = read_text(run.launcher.err_path);
  INFO(err);
  REQUIRE(code);
  CHECK(*code == 124);
  check_hung_and_waiting(run, 1, {0});
  const std::string hung_stacks = read_text(run.run_dir + "/attempt_0/rank_1/stacks.txt");
  CHECK_THAT(hung_stacks, Contains("test_hook_hang_here") && Contains("mgtrain::run_training"));
  CHECK_THAT(read_text(run.run_dir + "/attempt_0/rank_0/stacks.txt"), Contains("mgtrain::"));
  YAML::Node report = YAML::Load(read_text(run.run_dir + "/failure.json"));
  CHECK_THAT(report["root_cause"]["top_frames"][0].as<std::string>(), Contains("test_hook_hang_here"));
}
