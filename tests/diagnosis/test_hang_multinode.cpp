// Hang diagnosis across nodes as real processes (docs/diagnosis.md): two `mgtrain launch --nnodes 2`
// node agents on loopback, 2 ranks each, Python workers (the shipped progress helper) that wait for each other at a
// file barrier in a directory both nodes share (a collective). Global rank 3 gets stuck in stuck_here() on node 1;
// the others wait for it. Node 1 finds the hang, the server asks node 0 to dump its ranks' stacks too, and only then
// is anything stopped: every rank's stacks.txt exists on both nodes within the hang timeout + 5 s, before any worker
// gets SIGTERM; failure.json names rank 3 hung (the root cause across nodes) and ranks 0-2 waiting; both launchers
// exit 124 (docs/exit-codes.md).
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "integration/launch_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kHangTimeoutS = 6.0;
constexpr int kNodes = 2;
constexpr int kNproc = 2;
constexpr int kWorld = kNodes * kNproc;

// test_hang.cpp's Python worker with the barrier in BARRIER_DIR (shared by the nodes). The last rank stops reporting
// after step 10, slows down and gets stuck in stuck_here() at step 15 (about 2 s later), so node 1 finds the hang
// before node 0's ranks, which report 15 and wait at 16, have been silent for the hang timeout: node 0 dumps its
// stacks because node 1 found a hang, not because it found one itself. Its SIGTERM handler records whether every
// rank's stacks.txt existed by then (STACKS_PATTERN with {node} and {rank}).
constexpr const char* kPythonWorker = R"(
import os, signal, sys, time
sys.path.insert(0, os.environ["HELPER_DIR"])
from mgtrain_progress import progress

barrier, rank, world = os.environ["BARRIER_DIR"], int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
nproc = int(os.environ["LOCAL_WORLD_SIZE"])

def on_term(signum, frame):
    pattern = os.environ["STACKS_PATTERN"]
    present = all(os.path.exists(pattern.format(node=r // nproc, rank=r)) for r in range(world))
    with open(f"{barrier}/term_{rank}", "w") as out:
        out.write("all stacks\n" if present else "stacks missing\n")
    sys.exit(143)

signal.signal(signal.SIGTERM, on_term)

def arrive(step):
    with open(f"{barrier}/at_{rank}.tmp", "w") as out:
        out.write(str(step))
    os.replace(f"{barrier}/at_{rank}.tmp", f"{barrier}/at_{rank}")
    for other in range(world):
        while True:
            try:
                with open(f"{barrier}/at_{other}") as at:
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
    if rank == world - 1 and step > 10:
        if step == 15:
            stuck_here()
        time.sleep(0.45)  # slowing down, no more reports, then stuck: its progress stopped 2 s before the others'
        continue
    progress(step)
    time.sleep(0.05)
)";

std::string rank_dir(const std::string& run, int rank) {
  return run + "/node_" + std::to_string(rank / kNproc) + "/attempt_0/rank_" + std::to_string(rank);
}

// `rank` of attempt 0 has reported `step` or more.
bool reported(const std::string& run, int rank, int step) {
  std::ifstream in(rank_dir(run, rank) + "/heartbeat");
  long value = -1;
  return (in >> value) && value >= step;
}

bool all_stacks(const std::string& run) {
  for (int rank = 0; rank < kWorld; ++rank) {
    if (!std::filesystem::exists(rank_dir(run, rank) + "/stacks.txt")) return false;
  }
  return true;
}

void check_job_verdict(const std::string& failure_json) {
  INFO(failure_json);
  YAML::Node report = YAML::Load(failure_json);
  CHECK(report["exit_code"].as<int>() == 124);
  const YAML::Node cause = report["root_cause"];
  CHECK(cause["global_rank"].as<int>() == 3);
  CHECK(cause["node_rank"].as<int>() == 1);
  CHECK(cause["hung"].as<bool>());
  CHECK(cause["last_step"].as<long>() == 10);
  CHECK_FALSE(cause["last_progress_time"].IsNull());
  CHECK_THAT(cause["stacks"].as<std::string>(), Contains("node_1/attempt_0/rank_3/stacks.txt"));
  REQUIRE(cause["top_frames"].size() >= 1);
  CHECK_THAT(cause["top_frames"][0].as<std::string>(), Contains("stuck_here"));
  std::vector<int> waiting;
  for (const YAML::Node& other : report["other_failures"]) {
    CHECK_FALSE(other["hung"].as<bool>());
    if (other["waiting"].as<bool>()) waiting.push_back(other["global_rank"].as<int>());
    CHECK(other["last_step"].as<long>() == 15);
    CHECK_FALSE(other["stacks"].IsNull());
  }
  std::sort(waiting.begin(), waiting.end());
  CHECK(waiting == std::vector<int>{0, 1, 2});
}

}  // namespace

TEST_CASE("2 nodes x 2 ranks: rank 3 stuck in stuck_here() is named hung across nodes, every rank's stacks first",
          "[diagnosis][hang][multinode]") {
  if (std::system("python3 -c 'import os' >/dev/null 2>&1") != 0) {
    WARN("skipped: no python3");
    return;
  }
  TempDir dir;
  const std::string barrier = dir / "barrier";
  std::filesystem::create_directories(barrier);
  const std::string worker = dir / "worker.py";
  std::ofstream(worker) << kPythonWorker;
  const std::string run = dir / "runs/hang";
  const std::string port = std::to_string(free_port());
  const std::vector<std::pair<std::string, std::string>> env = {
      {"BARRIER_DIR", barrier},
      {"HELPER_DIR", std::string(MGTRAIN_SOURCE_DIR) + "/share/mgtrain/python"},
      {"STACKS_PATTERN", run + "/node_{node}/attempt_0/rank_{rank}/stacks.txt"}};
  std::vector<ChildProcess> nodes;
  for (int node = 0; node < kNodes; ++node) {
    nodes.push_back(start_process({kMgtrain,
                                   "launch",
                                   "--nnodes",
                                   std::to_string(kNodes),
                                   "--node-rank",
                                   std::to_string(node),
                                   "--nproc",
                                   std::to_string(kNproc),
                                   "--master-addr",
                                   "127.0.0.1",
                                   "--master-port",
                                   port,
                                   "--run-id",
                                   "hang",
                                   "--log-dir",
                                   dir / "runs",
                                   "--join-timeout",
                                   "30",
                                   "--hang-timeout",
                                   "6",
                                   "--grace-period",
                                   "2",
                                   "--",
                                   "python3",
                                   worker},
                                  dir / ("node" + std::to_string(node)), env));
  }
  const auto output = [&](int node) { return read_text(nodes[node].out_path) + read_text(nodes[node].err_path); };
  // Rank 3 reports 10 and no more: detection on node 1 is due 6 s later.
  const bool last_report = wait_until([&] { return reported(run, 3, 10); }, 60s);
  INFO("node 0:\n" << output(0) << "\nnode 1:\n" << output(1));
  REQUIRE(last_report);
  const Clock::time_point stuck = Clock::now();
  const bool dumped = wait_until([&] { return all_stacks(run); }, 30s);
  const double took = std::chrono::duration<double>(Clock::now() - stuck).count();
  std::vector<std::optional<int>> codes;
  for (const ChildProcess& node : nodes) codes.push_back(wait_for_exit(node.pid, 40s));
  INFO("node 0:\n" << output(0) << "\nnode 1:\n" << output(1));
  REQUIRE(dumped);
  CHECK(took <= kHangTimeoutS + 5);
  for (const std::optional<int>& code : codes) {
    REQUIRE(code);
    CHECK(*code == 124);
  }
  // Every rank's stacks, on both nodes, were there before any worker got SIGTERM.
  for (int rank = 0; rank < kWorld; ++rank) {
    CHECK(read_text(barrier + "/term_" + std::to_string(rank)) == "all stacks\n");
  }
  CHECK_THAT(read_text(rank_dir(run, 3) + "/stacks.txt"), Contains("stuck_here"));
  // Node 1 found it; node 0 was asked to dump its ranks' stacks before the stop.
  CHECK_THAT(output(1), Contains("rank 3 hung: no progress for") && Contains("(last step 10 at "));
  CHECK_THAT(output(0), Contains("another node found a hang: rank 3 (local rank 1) on node 1") &&
                            Contains("collecting every rank's stacks before stopping the workers"));
  CHECK_THAT(output(0), Contains("its progress stopped first of 4 stalled ranks"));
  check_job_verdict(read_text(run + "/node_0/failure.json"));
  check_job_verdict(read_text(run + "/node_1/failure.json"));
}
