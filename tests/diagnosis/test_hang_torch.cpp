// Hang detection with torch 2.x over gloo (issue 24's "Done when", docs/diagnosis.md): the real
// `mgtrain launch --nproc 3 --hang-timeout 3` running Python DDP-style workers of the torch venv
// (init_process_group("gloo") with a 600 s timeout) that report progress through the shipped helper. The last rank
// has one batch fewer (uneven inputs, the classic DDP hang): it skips the all_reduce of step 16 and waits in the
// final barrier, which the others never reach, while they block in that all_reduce. Its last report is step 15, the
// others' step 16, so the root-cause rule names it; the job must be diagnosed (failure.json, every rank's stacks.txt,
// the waiting ranks' Python frames in all_reduce) and end with exit 124 within hang-timeout + 10 s, long before
// gloo's timeout. Skipped, saying why, without the venv (tests/CMakeLists.txt: MGTRAIN_TORCH2_VENV).
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "integration/launch_fixture.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kHangTimeoutS = 3.0;

constexpr const char* kGlooWorker = R"(
import datetime, os, sys, time
sys.path.insert(0, os.environ["HELPER_DIR"])
from mgtrain_progress import progress
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
rank, world = dist.get_rank(), dist.get_world_size()

def batches(count):
    for _ in range(count):
        yield torch.randn(256)

# Uneven inputs: the last rank runs out after 15 batches, the others go on.
for step, batch in enumerate(batches(15 if rank == world - 1 else 10**9), 1):
    progress(step)             # a batch is in: this step is under way
    grad = batch * 2           # forward and backward
    time.sleep(0.05)
    dist.all_reduce(grad)      # the gradients' all-reduce: the last rank skips step 16's
dist.barrier()                 # the end of training, where the last rank waits for the others
)";

std::string rank_file(const std::string& run_dir, int rank, const std::string& name) {
  return run_dir + "/attempt_0/rank_" + std::to_string(rank) + "/" + name;
}

long reported_step(const std::string& run_dir, int rank) {
  std::ifstream in(rank_file(run_dir, rank, "heartbeat"));
  long value = -1;
  return in >> value ? value : -1;
}

}  // namespace

TEST_CASE("torch over gloo: a rank that skips an all_reduce is named hung, every rank's stacks taken",
          "[diagnosis][hang][torch]") {
  const std::string python = std::string(MGTRAIN_TORCH2_VENV) + "/bin/python";
  if (!std::filesystem::exists(python) ||
      std::system((python + " -c 'import torch.distributed' >/dev/null 2>&1").c_str()) != 0) {
    WARN("skipped: no torch 2.x venv at " + std::string(MGTRAIN_TORCH2_VENV) +
         " whose python imports torch.distributed (scripts/torch2-env.sh creates it)");
    return;
  }
  TempDir dir;
  const std::string worker = dir / "worker.py";
  std::ofstream(worker) << kGlooWorker;
  const std::string run_dir = dir / "runs/hang";
  const std::string prefix = dir / "launcher";
  ChildProcess launcher =
      start_process({kMgtrain, "launch", "--nproc", "3", "--run-id", "hang", "--log-dir", dir / "runs",
                     "--hang-timeout", "3", "--grace-period", "2", "--", python, worker},
                    prefix, {{"HELPER_DIR", std::string(MGTRAIN_SOURCE_DIR) + "/share/mgtrain/python"}});
  // torch's import and the gloo mesh take a few seconds; then 15 steps of ~60 ms until the last rank leaves.
  REQUIRE(wait_until([&] { return reported_step(run_dir, 2) >= 15; }, 90s));
  const Clock::time_point hang_start = Clock::now();
  const std::optional<int> code = wait_for_exit(launcher.pid, 60s);
  const double took = std::chrono::duration<double>(Clock::now() - hang_start).count();
  const std::string err = read_text(launcher.err_path);
  INFO(err);
  REQUIRE(code);
  CHECK(*code == 124);
  CHECK(took <= kHangTimeoutS + 10);  // gloo's own timeout is 600 s
  CHECK_THAT(err, Contains("rank 2 hung: no progress for") && Contains("(last step 15 at ") &&
                      Contains("ranks 0, 1 waiting since"));

  YAML::Node report = YAML::Load(read_text(run_dir + "/failure.json"));
  INFO(read_text(run_dir + "/failure.json"));
  CHECK(report["exit_code"].as<int>() == 124);
  CHECK(report["root_cause"]["global_rank"].as<int>() == 2);
  CHECK(report["root_cause"]["hung"].as<bool>());
  CHECK(report["root_cause"]["last_step"].as<long>() == 15);
  CHECK(report["root_cause"]["stacks"].as<std::string>() == rank_file(run_dir, 2, "stacks.txt"));
  CHECK(report["root_cause"]["top_frames"].size() >= 1);
  int waiting = 0;
  for (const YAML::Node& other : report["other_failures"]) {
    CHECK_FALSE(other["hung"].as<bool>());
    if (other["waiting"].as<bool>()) {
      ++waiting;
      CHECK(other["last_step"].as<long>() == 16);
    }
  }
  CHECK(waiting == 2);
  // Every rank's stacks, taken through Python's faulthandler before the stop: the waiting ranks in all_reduce, the
  // hung one in the barrier it went to instead.
  for (int rank = 0; rank < 3; ++rank) {
    CAPTURE(rank);
    REQUIRE(std::filesystem::exists(rank_file(run_dir, rank, "stacks.txt")));
    const std::string stacks = read_text(rank_file(run_dir, rank, "stacks.txt"));
    CHECK_THAT(stacks, Contains("worker.py"));
    CHECK_THAT(stacks, Contains(rank == 2 ? "in barrier" : "in all_reduce"));
  }
}
