// Straggler detection among ranks in lock-step, end to end (docs/diagnosis.md): the real `mgtrain launch`
// with 3 Python ranks that meet at a file barrier after every step (as DDP ranks meet in each all-reduce, so their
// step rates are equal) and report the seconds they waited there through the shipped helper
// (progress(step, wait_s=...)). A rank whose own work takes 30 % longer must be flagged within 60 s by its busy time;
// without the slowdown nothing is flagged over the test's length; run.json's episode carries the busy times. The
// built-in trainer (torch build) reports its wait itself: a rank slowed by SIGSTOP/SIGCONT is flagged. 8 s windows
// keep each case near 30 s; --hang-timeout gives the workers their progress files.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "integration/launch_fixture.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

// Each step: the rank's own work (a sleep, 30 % longer on SLOW_RANK), then the barrier, whose wait is reported.
constexpr const char* kLockstepWorker = R"(
import os, sys, time
sys.path.insert(0, os.environ["HELPER_DIR"])
from mgtrain_progress import progress

run, rank, world = os.environ["MGTRAIN_RUN_DIR"], int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
work = 0.1 * (1.3 if os.environ.get("SLOW_RANK") == str(rank) else 1.0)

def barrier(step):
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
            time.sleep(0.001)

step = 0
while True:
    step += 1
    time.sleep(work)
    started = time.monotonic()
    barrier(step)
    progress(step, wait_s=time.monotonic() - started)
)";

struct LockstepRun {
  TempDir dir{"mgtrain-lockstep"};
  ChildProcess launcher;
  std::string run_dir = dir / "runs/s";

  explicit LockstepRun(const std::string& slow_rank) {
    const std::string worker = dir / "worker.py";
    std::ofstream(worker) << kLockstepWorker;
    launcher = start_process(
        {kMgtrain, "launch", "--nproc", "3", "--log-dir", dir / "runs", "--run-id", "s", "--grace-period", "2",
         "--hang-timeout", "20", "launch.straggler_window=8", "--", "python3", worker},
        dir / "launcher",
        {{"SLOW_RANK", slow_rank}, {"HELPER_DIR", std::string(MGTRAIN_SOURCE_DIR) + "/share/mgtrain/python"}});
  }
  ~LockstepRun() {
    if (kill(launcher.pid, 0) == 0) {
      kill(launcher.pid, SIGTERM);
      if (!wait_for_exit(launcher.pid, 10s)) {
        kill(launcher.pid, SIGKILL);
        wait_for_exit(launcher.pid, 5s);
      }
    }
  }
  std::string console() const { return read_text(launcher.err_path) + read_text(launcher.out_path); }
  std::string progress_line(int rank) const {
    return read_text(run_dir + "/attempt_0/rank_" + std::to_string(rank) + "/heartbeat");
  }
};

bool have_python() { return std::system("python3 -c 'import os' >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("lock-step ranks: the rank with 30 % more own work is flagged by its busy time",
          "[diagnosis][straggler][lockstep]") {
  if (!have_python()) {
    WARN("skipped: no python3");
    return;
  }
  LockstepRun run("1");
  const auto started = std::chrono::steady_clock::now();
  const bool flagged =
      wait_until([&] { return run.console().find("rank 1 is a straggler") != std::string::npos; }, 60s);
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::string console = run.console();
  INFO("launcher console:\n" << console);
  REQUIRE(flagged);
  CHECK(after < 60);
  const std::size_t line_start = console.rfind('\n', console.find("rank 1 is a straggler")) + 1;
  const std::string line = console.substr(line_start, console.find('\n', line_start) - line_start);
  // By busy time (0.13 s against 0.1 s, plus the barrier's own bit of work); the step rates, equal in lock-step, could
  // not have told.
  std::smatch parts;
  REQUIRE(std::regex_match(line, parts,
                           std::regex(R"(mgtrain: warning: rank 1 is a straggler: (0\.1[2-4]\d*) s of own work per )"
                                      R"(step against a median of (0\.09\d*|0\.1\d*) s \((\d\d) % more; steps/s equal )"
                                      R"(in lock-step: (\d+\.\d+) against (\d+\.\d+)\) over the last 8 s)")));
  CHECK(std::stod(parts[3]) >= 25);
  CHECK(std::stod(parts[4]) == Approx(std::stod(parts[5])).epsilon(0.03));
  CHECK(console.find("rank 0 is a straggler") == std::string::npos);
  CHECK(console.find("rank 2 is a straggler") == std::string::npos);
  CHECK_THAT(run.progress_line(1), Contains("\"wait\":"));
  // run.json's episode says what was compared.
  REQUIRE(
      wait_until([&] { return read_text(run.run_dir + "/run.json").find("busy_per_step") != std::string::npos; }, 5s));
  const nlohmann::json episodes = nlohmann::json::parse(read_text(run.run_dir + "/run.json"))["stragglers"];
  REQUIRE(episodes.size() == 1);
  CHECK(episodes[0]["rank"].get<int>() == 1);
  CHECK(episodes[0]["busy_per_step"].get<double>() > 1.2 * episodes[0]["median_busy_per_step"].get<double>());
  CHECK(episodes[0]["highest_busy_per_step"].get<double>() >= episodes[0]["busy_per_step"].get<double>());
}

TEST_CASE("lock-step ranks doing equal work are not flagged", "[diagnosis][straggler][lockstep]") {
  if (!have_python()) {
    WARN("skipped: no python3");
    return;
  }
  LockstepRun run("none");
  // Every rank reports its wait (so busy times are compared) ...
  REQUIRE(wait_until(
      [&] {
        for (int rank = 0; rank < 3; ++rank)
          if (run.progress_line(rank).find("\"wait\":") == std::string::npos) return false;
        return true;
      },
      60s));
  // ... for three windows and a half (judging starts 4 s after the first steps).
  std::this_thread::sleep_for(28s);
  INFO("launcher console:\n" << run.console());
  REQUIRE(kill(run.launcher.pid, 0) == 0);  // still running: the ranks were judged all along
  CHECK(run.console().find("is a straggler") == std::string::npos);
  for (int rank = 0; rank < 3; ++rank) CHECK_THAT(run.progress_line(rank), Contains("\"wait\":"));
}

// Needs the torch build (mgtrain-worker next to mgtrain): the built-in trainer over gloo on the CPU writes "wait" (its
// time in the gradient buckets' and the vote's Work::wait); rank 1 is slowed by being stopped 30 ms of every 100 ms
// (SIGSTOP/SIGCONT from the test), so it does ~40 % more own work per step, and is flagged by its busy time.
TEST_CASE("built-in trainer: the rank slowed down is flagged by its busy time", "[diagnosis][straggler][torch]") {
  if (!std::filesystem::exists(std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker")) {
    WARN("skipped: mgtrain-worker is not built (the torch build runs this case)");
    return;
  }
  TempDir dir;
  const std::string run_dir = dir / "runs/t";
  ChildProcess launcher = start_process(
      {kMgtrain, "launch", "--nproc", "2", "--run-id", "t", "--log-dir", dir / "runs", "--hang-timeout", "30",
       "--grace-period", "2", std::string(MGTRAIN_SOURCE_DIR) + "/configs/bench/mlp-64.yaml",
       "launch.straggler_window=8", "train.max_steps=0", "train.epochs=1000000", "data.synthetic_samples=4096"},
      dir / "launcher");
  const auto console = [&] { return read_text(launcher.err_path) + read_text(launcher.out_path); };
  const auto line_of = [&](int rank) {
    return read_text(run_dir + "/attempt_0/rank_" + std::to_string(rank) + "/heartbeat");
  };
  // Both ranks train and report their wait.
  REQUIRE(wait_until(
      [&] {
        return line_of(0).find("\"wait\":") != std::string::npos && line_of(1).find("\"wait\":") != std::string::npos;
      },
      60s));
  pid_t slowed = -1;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string variables = read_text(entry.path() / "environ");
    if (variables.find("MGTRAIN_RUN_DIR=" + run_dir) != std::string::npos &&
        variables.find(std::string("RANK=1") + '\0') != std::string::npos &&
        read_text(entry.path() / "cmdline").find("mgtrain-worker") != std::string::npos) {
      slowed = std::stoi(name);
    }
  }
  REQUIRE(slowed > 0);
  const auto started = std::chrono::steady_clock::now();
  bool flagged = false;
  while (!flagged && std::chrono::steady_clock::now() - started < 60s) {
    kill(slowed, SIGSTOP);
    std::this_thread::sleep_for(30ms);
    kill(slowed, SIGCONT);
    std::this_thread::sleep_for(70ms);
    flagged = console().find("rank 1 is a straggler") != std::string::npos;
  }
  kill(slowed, SIGCONT);
  INFO("launcher console:\n" << console());
  REQUIRE(flagged);
  CHECK_THAT(console(),
             Contains("rank 1 is a straggler: ") && Contains(" s of own work per step against a median of "));
  CHECK(console().find("rank 0 is a straggler") == std::string::npos);
}
