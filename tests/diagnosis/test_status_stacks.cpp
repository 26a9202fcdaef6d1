// `mgtrain status --stacks` and the status API's POST /stacks against a running job of the real `mgtrain launch`
// (docs/diagnosis.md): two Python ranks, rank 1 waiting inside waiting_for_the_release_file(); the
// command prints both ranks' top frames and stacks-K.txt files, earlier dumps are kept, stacks.txt (the hang
// report's) is not written, and the job goes on and exits 0 once released. A second request while a dump runs is
// told busy; the error cases (no such run, no status API, token missing or refused, run no longer running) end with
// their documented exit codes (docs/exit-codes.md).
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "integration/launch_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

// Each rank says it is ready, then waits for <TEST_DIR>/release: rank 1 inside waiting_for_the_release_file(),
// rank 0 in the module's own loop. BLOCK_STACKS_RANK=R: rank R blocks the stack signal, so its Python frames can
// never come: a dump of it waits for them (2 s, lib/diagnose/stack_dump.cpp) with the signal pending.
constexpr const char* kWorker = R"PY(
import os, signal, sys, time
run, rank = os.environ["MGTRAIN_RUN_DIR"], int(os.environ["RANK"])
release = os.path.join(os.environ["TEST_DIR"], "release")
if os.environ.get("BLOCK_STACKS_RANK") == str(rank):
    signal.pthread_sigmask(signal.SIG_BLOCK, [int(os.environ["MGTRAIN_STACK_SIGNAL"])])

def waiting_for_the_release_file():
    while not os.path.exists(release):
        time.sleep(0.02)

ready = os.path.join(run, f"ready_{rank}")
with open(ready + ".part", "w") as part:  # renamed whole: the test reads the pid as soon as the name appears
    part.write(str(os.getpid()))
os.rename(ready + ".part", ready)
if rank == 1:
    waiting_for_the_release_file()
else:
    while not os.path.exists(release):
        time.sleep(0.02)
print(f"rank {rank} finished", flush=True)
)PY";

bool have_python() { return access(kPython, X_OK) == 0; }

// A job of two Python ranks with the status API on a free port, up once both ranks are ready.
struct StacksRun {
  TempDir dir{"mgtrain-status-stacks"};
  std::string log_dir = dir / "runs";
  std::string run_dir = dir / "runs/live";
  ChildProcess launcher;

  explicit StacksRun(std::vector<std::string> extra_flags = {},
                     std::vector<std::pair<std::string, std::string>> env = {}) {
    std::ofstream(dir / "worker.py") << kWorker;
    std::vector<std::string> argv = {
        kMgtrain,    "launch", "--nproc",  "2",    "--status-port",  std::to_string(free_port()),
        "--log-dir", log_dir,  "--run-id", "live", "--grace-period", "3"};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    argv.insert(argv.end(), {"--", kPython, dir / "worker.py"});
    env.emplace_back("TEST_DIR", dir.path());
    launcher = start_process(argv, dir / "launcher", env);
    const bool up = wait_until(
        [&] {
          return file_exists(run_dir + "/ready_0") && file_exists(run_dir + "/ready_1") &&
                 file_exists(run_dir + "/status_endpoint");
        },
        30s);
    if (!up) {
      kill(launcher.pid, SIGKILL);
      wait_for_exit(launcher.pid, 5s);
      FAIL("the job did not come up; launcher stderr: " << read_text(launcher.err_path));
    }
  }
  ~StacksRun() {
    if (kill(launcher.pid, 0) == 0) {
      kill(launcher.pid, SIGKILL);
      wait_for_exit(launcher.pid, 10s);
    }
  }
  CapturedRun status_stacks(std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv = {kMgtrain, "status", "live", "--log-dir", log_dir, "--stacks"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    CaptureOptions options;
    options.timeout_s = 60;
    return run_and_capture(argv, options);
  }
  std::string rank_dir(int rank) const { return run_dir + "/attempt_0/rank_" + std::to_string(rank); }
  // Releases the ranks and expects the job to end with 0 and both ranks to have finished.
  void expect_finishes_normally() {
    CHECK(kill(launcher.pid, 0) == 0);  // still running before the release
    std::ofstream(dir / "release").close();
    const std::optional<int> code = wait_for_exit(launcher.pid, 30s);
    INFO(read_text(launcher.err_path));
    REQUIRE(code.has_value());
    CHECK(*code == 0);
    CHECK_THAT(read_text(rank_dir(0) + "/stdout.log"), Catch::Contains("rank 0 finished"));
    CHECK_THAT(read_text(rank_dir(1) + "/stdout.log"), Catch::Contains("rank 1 finished"));
  }
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Whether `pid` has a signal pending for the whole process (ShdPnd of /proc/<pid>/status is not all zeros).
bool signal_pending(const std::string& pid) {
  const std::string status = read_text("/proc/" + pid + "/status");
  const std::size_t at = status.find("ShdPnd:");
  if (at == std::string::npos) return false;
  const std::string mask = status.substr(at + 7, status.find('\n', at) - at - 7);
  return mask.find_first_of("123456789abcdef") != std::string::npos;
}

}  // namespace

TEST_CASE("status --stacks: both ranks' frames of a running job, which goes on and exits 0", "[status_stacks]") {
  if (!have_python()) {
    WARN("skipped: no " << kPython);
    return;
  }
  StacksRun run;
  const auto started = Clock::now();
  CapturedRun first = run.status_stacks();
  const double took = seconds_since(started);
  INFO(first.out << first.err << read_text(run.launcher.err_path));
  REQUIRE(first.exit_code == 0);
  CHECK(took < 10.0);
  CHECK_THAT(first.out, Catch::Contains("stacks of run live, attempt 1: 2 ranks dumped"));
  CHECK_THAT(first.out, Catch::Contains("rank 0 (local 0, pid ") && Catch::Contains("rank 1 (local 1, pid "));
  // Where they are, ranks with identical top frames together: here two places, one rank each.
  CHECK_THAT(first.out, Catch::Contains("2 places (ranks with identical top frames together):"));
  CHECK_THAT(first.out, Catch::Contains("  rank 1 (1): waiting_for_the_release_file (worker.py:"));  // its top frame
  CHECK_THAT(first.out, Catch::Contains("  rank 0 (1): <module> (worker.py:"));                      // rank 0's
  CHECK_THAT(first.out,
             Catch::Contains(run.rank_dir(0) + "/stacks-1.txt") && Catch::Contains(run.rank_dir(1) + "/stacks-1.txt"));
  CHECK_THAT(read_text(run.rank_dir(1) + "/stacks-1.txt"), Catch::Contains("in waiting_for_the_release_file"));
  CHECK_FALSE(file_exists(run.rank_dir(1) + "/stacks.txt"));  // the hang report's file stays untouched

  // Again, as JSON: the next number, the first dump kept.
  CapturedRun second = run.status_stacks({"--json"});
  REQUIRE(second.exit_code == 0);
  const nlohmann::json answer = nlohmann::json::parse(second.out);
  CHECK(answer["run_id"] == "live");
  CHECK(answer["attempt"] == 0);
  REQUIRE(answer["ranks"].size() == 2);
  for (const nlohmann::json& rank : answer["ranks"]) {
    const int r = rank["rank"].get<int>();
    CHECK(rank["stacks_file"] == run.rank_dir(r) + "/stacks-2.txt");
    CHECK(rank["python_frames"] == true);
    CHECK(rank["pid"].get<int>() > 0);
    CHECK(file_exists(run.rank_dir(r) + "/stacks-1.txt"));
  }
  CHECK_THAT(answer["ranks"][1]["top_frames"][0].get<std::string>(),
             Catch::StartsWith("waiting_for_the_release_file (worker.py:"));
  run.expect_finishes_normally();
}

TEST_CASE("status --stacks: a second request while a dump runs is told busy at once", "[status_stacks]") {
  if (!have_python()) {
    WARN("skipped: no " << kPython);
    return;
  }
  // Rank 0 cannot answer the stack signal: each dump waits 2 s for its Python frames, the signal pending meanwhile.
  StacksRun run({"--diagnose-timeout", "5"}, {{"BLOCK_STACKS_RANK", "0"}});
  const std::string rank0_pid = read_text(run.run_dir + "/ready_0");
  REQUIRE(std::stoi(rank0_pid) > 0);
  const auto started = Clock::now();
  ChildProcess slow =
      start_process({kMgtrain, "status", "live", "--log-dir", run.log_dir, "--stacks"}, run.dir / "slow");
  REQUIRE(wait_until([&] { return signal_pending(rank0_pid); }, 5s));  // the first dump is under way
  const auto asked = Clock::now();
  CapturedRun busy = run.status_stacks();
  INFO(busy.out << busy.err);
  CHECK(busy.exit_code == 6);
  CHECK_THAT(busy.err, Catch::Contains("busy"));
  CHECK(seconds_since(asked) < 1.5);  // not queued behind the running dump
  const std::optional<int> slow_code = wait_for_exit(slow.pid, 20s);
  const std::string slow_out = read_text(slow.out_path);
  INFO(slow_out << read_text(slow.err_path));
  REQUIRE(slow_code == std::optional<int>(0));
  const double took = seconds_since(started);
  CHECK(took >= 1.8);  // it waited for rank 0's Python frames
  CHECK(took < 10.0);  // and not much longer
  CHECK_THAT(slow_out, Catch::Contains("note: rank 0") && Catch::Contains("waiting_for_the_release_file"));
  // Free again: the next request dumps.
  CHECK(run.status_stacks().exit_code == 0);
  run.expect_finishes_normally();
}

TEST_CASE("status --stacks: no such run, no status API, token missing or refused, not running", "[status_stacks]") {
  if (!have_python()) {
    WARN("skipped: no " << kPython);
    return;
  }
  StacksRun run;
  CapturedRun missing = run_and_capture({kMgtrain, "status", "nope", "--log-dir", run.log_dir, "--stacks"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("no run 'nope'"));

  CapturedRun plain_launch = mgtrain_launch(run.dir, {"--run-id", "plain", "--", "/bin/true"});
  REQUIRE(plain_launch.exit_code == 0);
  CapturedRun no_api = run_and_capture({kMgtrain, "status", "plain", "--log-dir", run.log_dir, "--stacks"});
  CHECK(no_api.exit_code == 4);
  CHECK_THAT(no_api.err, Catch::Contains("has no status API") && Catch::Contains("--status-port PORT"));

  const std::string token_file = run.run_dir + "/status_token";
  const std::string token = read_text(token_file);
  fs::rename(token_file, token_file + ".away");
  CapturedRun no_token = run.status_stacks();
  CHECK(no_token.exit_code == 5);
  CHECK_THAT(no_token.err, Catch::Contains(token_file));
  std::ofstream(token_file) << std::string(64, '0') << "\n";
  CapturedRun wrong = run.status_stacks();
  CHECK(wrong.exit_code == 5);
  CHECK_THAT(wrong.err, Catch::Contains("refused the token"));
  CHECK_FALSE(file_exists(run.rank_dir(0) + "/stacks-1.txt"));  // nothing was dumped
  fs::rename(token_file + ".away", token_file);

  run.expect_finishes_normally();
  CapturedRun ended = run.status_stacks();
  CHECK(ended.exit_code == 3);
  CHECK_THAT(ended.err, Catch::Contains("is not running"));
}
