// The job-wide view of a multi-node job (docs/monitoring.md#several-nodes), for real: node agents in network namespaces
// (netns_hosts.hpp). The host's status API lists every rank of every node and shows a rank killed elsewhere; stragglers
// judged across nodes; every restart's recovery timed from the fault, with the steps it lost. Skips (saying why) where
// namespaces cannot be made.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "launch_fixture.hpp"
#include "multinode_job.hpp"
#include "netns_agent.hpp"
#include "netns_hosts.hpp"
#include "process/run_capture.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// One rank of the host's /status JSON (`mgtrain status --json` in the host's namespace).
struct StatusRank {
  int rank = -1;
  int node_rank = -1;
  long pid = 0;
  std::string host;
  std::string state;
};

// The job's host's /status JSON (`mgtrain status --json` in its namespace); null when it does not answer.
nlohmann::json host_status_json(const NetnsHosts& hosts, const TempDir& dir) {
  std::vector<std::string> argv = hosts.exec_prefix(0);
  argv.insert(argv.end(), {kMgtrain, "status", "mn", "--log-dir", dir / "runs", "--json"});
  mgtrain::CaptureOptions options;
  options.timeout_s = 20;
  const mgtrain::CapturedRun run = mgtrain::run_and_capture(argv, options);
  if (run.exit_code != 0) return nullptr;
  return nlohmann::json::parse(run.out, nullptr, false);
}

// A worker stepping every 20 ms (rank SLOW_RANK every 20 / 0.7 ms) for `seconds`, each step written into its progress
// file at its due time, so the machine's load does not change the rates (as tests/diagnosis/test_straggler.cpp).
std::string paced_worker(const TempDir& dir, double seconds) {
  return write_script(dir / "paced.sh", "exec python3 - " + std::to_string(seconds) + R"SH( <<'EOF'
import os, sys, time
period = 0.02
if os.environ.get("SLOW_RANK") == os.environ["RANK"]:
    period /= 0.7
path = os.environ["MGTRAIN_HEARTBEAT_FILE"]
start = time.monotonic()
step = 0
while time.monotonic() - start < float(sys.argv[1]):
    step += 1
    time.sleep(max(0.0, start + step * period - time.monotonic()))
    with open(path + ".tmp", "w") as f:
        f.write('{"step":%d,"loss":1.5,"time":%f}\n' % (step, time.time()))
    os.replace(path + ".tmp", path)
EOF
)SH");
}

// Whether the host's /status flags `rank` as a straggler now.
bool flagged(const nlohmann::json& status, int rank) {
  if (!status.is_object() || !status.contains("ranks")) return false;
  for (const auto& r : status["ranks"]) {
    if (r["rank"].get<int>() == rank) return r["straggler"].get<bool>();
  }
  return false;
}

// The ranks the job's host lists now (empty when it does not answer yet), and its attempt.
std::vector<StatusRank> host_status(const NetnsHosts& hosts, const TempDir& dir, int& attempt) {
  const nlohmann::json status = host_status_json(hosts, dir);
  std::vector<StatusRank> ranks;
  if (!status.is_object() || !status.contains("ranks")) return ranks;
  attempt = status.value("attempt", attempt);
  for (const nlohmann::json& r : status["ranks"]) {
    if (!r.contains("node_rank")) continue;  // the job-wide view names every rank's node
    ranks.push_back({r["rank"].get<int>(), r["node_rank"].get<int>(), r["pid"].get<long>(),
                     r["host"].get<std::string>(), r["state"].get<std::string>()});
  }
  return ranks;
}

}  // namespace

TEST_CASE("job-wide status: the host's API lists every rank of both nodes, and a rank killed on node 1 shows dead",
          "[multinode][status]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  // Attempt 0 runs until the test kills rank 3, and the others ignore the stop's SIGTERM, so the round stays stopping
  // for the grace period (the test sees the stopped round, not only the next); attempt 1 ends at once.
  std::string worker = write_script(dir / "w.sh",
                                    "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ]; then exit 0; fi\n"
                                    "trap '' TERM\nwhile :; do sleep 0.2; done");
  const std::vector<std::string> more{"--max-restarts",
                                      "1",
                                      "--status-port",
                                      "29610",
                                      "--grace-period",
                                      "5",
                                      "log.resource_interval_s=0.5",
                                      "--",
                                      worker};
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0), more), dir / "node0");
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1), more), dir / "node1");
  // Every rank of both nodes, running, with its node and host.
  std::vector<StatusRank> ranks;
  int attempt = -1;
  const auto deadline = Clock::now() + 60s;
  while (Clock::now() < deadline) {
    ranks = host_status(hosts, dir, attempt);
    if (ranks.size() == 4 &&
        std::all_of(ranks.begin(), ranks.end(), [](const StatusRank& r) { return r.state == "running"; }))
      break;
    std::this_thread::sleep_for(100ms);
  }
  INFO("node 0 stderr:\n" << node0.err() << "\nnode 1 stderr:\n" << node1.err());
  REQUIRE(ranks.size() == 4);
  for (const StatusRank& rank : ranks) {
    CAPTURE(rank.rank);
    CHECK(rank.state == "running");
    CHECK(rank.node_rank == rank.rank / 2);
    CHECK(!rank.host.empty());
  }
  // The terminal's table says it is the job's and names the nodes.
  std::vector<std::string> table_argv = hosts.exec_prefix(0);
  table_argv.insert(table_argv.end(), {kMgtrain, "status", "mn", "--log-dir", dir / "runs"});
  const mgtrain::CapturedRun table = mgtrain::run_and_capture(table_argv);
  CHECK_THAT(table.out, Catch::Contains("every rank of the job's 2 nodes") && Catch::Contains("node  host"));
  // Each node samples its own ranks into its node directory's resources.jsonl.
  CHECK(wait_until(
      [&] {
        const std::string rows = read_text(dir / "runs/mn/node_1/resources.jsonl");
        return rows.find("\"node_rank\":1") != std::string::npos && rows.find("\"rank\":3") != std::string::npos;
      },
      20s));
  CHECK_FALSE(file_exists(dir / "runs/mn/resources.jsonl"));  // not the job's folder
  // Node 1 serves its own ranks' view from its node folder, and names the job's host.
  std::vector<std::string> node_argv = hosts.exec_prefix(1);
  node_argv.insert(node_argv.end(), {kMgtrain, "status", "mn/node_1", "--log-dir", dir / "runs", "--json"});
  const mgtrain::CapturedRun node_view = mgtrain::run_and_capture(node_argv);
  INFO("node 1's own view: " << node_view.out << node_view.err);
  REQUIRE(node_view.exit_code == 0);
  const nlohmann::json own = nlohmann::json::parse(node_view.out, nullptr, false);
  REQUIRE(own.is_object());
  CHECK(own["ranks"].size() == 2);
  CHECK(own["node_rank"] == 1);
  CHECK(own["job_status_host"] == hosts.address(0) + ":29500");
  CHECK(file_exists(dir / "runs/mn/status_endpoint"));  // the job's, the host's alone: node 1 wrote its own token
  CHECK(read_text(dir / "runs/mn/status_token") != read_text(dir / "runs/mn/node_1/status_token"));
  // SIGKILL rank 3 on node 1: the host shows its process exited before the restart replaces it.
  const long victim = ranks[3].pid;
  REQUIRE(kill(static_cast<pid_t>(victim), SIGKILL) == 0);
  const auto killed = Clock::now();
  std::optional<double> seen_after;
  while (Clock::now() < killed + 30s && !seen_after) {
    for (const StatusRank& rank : host_status(hosts, dir, attempt)) {
      if (rank.pid == victim && rank.state == "exited") seen_after = seconds_since(killed);
    }
    if (attempt > 0) break;  // the restart came first: too late to see it
  }
  REQUIRE(seen_after.has_value());
  WARN("rank 3's death reached the host's status API after " << *seen_after << " s (the design's bound: about 1 s)");
  CHECK(node0.wait(30s) == 0);
  CHECK(node1.wait(30s) == 0);
}

TEST_CASE("stragglers across nodes: one rank per node, node 1's 30 % slower, is flagged by the host",
          "[multinode][status][straggler]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  const std::string worker = paced_worker(dir, 60);
  const std::vector<std::string> more{"--status-port", "29611", "launch.straggler_window=8", "--", worker};
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0, 1), more), dir / "node0", {"SLOW_RANK=1"});
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1, 1), more), dir / "node1", {"SLOW_RANK=1"});
  nlohmann::json status;
  const bool seen = wait_until(
      [&] {
        status = host_status_json(hosts, dir);
        return flagged(status, 1);
      },
      45s);
  INFO("node 0 stderr:\n" << node0.err() << "\nnode 1 stderr:\n" << node1.err() << "\nstatus: " << status.dump());
  REQUIRE(seen);
  CHECK(status["straggler_detection"].get<bool>());
  CHECK_FALSE(flagged(status, 0));
  REQUIRE(wait_until([&] { return node0.err().find("is a straggler") != std::string::npos; }, 5s));
  CHECK_THAT(node0.err(), Catch::Matches(R"([\s\S]*rank 1 \(node 1, [^)]+\) is a straggler: \d+\.\d+ steps/s against )"
                                         R"(a median of \d+\.\d+ \(\d\d % slower\) over the last 8 s[\s\S]*)"));
  CHECK(node1.err().find("is a straggler") == std::string::npos);  // the host judges, not every node
  const nlohmann::json record = nlohmann::json::parse(read_text(dir / "runs/mn/run.json"));
  REQUIRE(record.contains("stragglers"));
  CHECK(record["stragglers"][0]["rank"].get<int>() == 1);
  CHECK(record["stragglers"][0]["node_rank"].get<int>() == 1);
  CHECK(!record["stragglers"][0]["host"].get<std::string>().empty());
}

TEST_CASE("stragglers across nodes: equal ranks on two nodes are not flagged while their rates are measured",
          "[multinode][status][straggler]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  const std::string worker = paced_worker(dir, 90);  // the 45 s allowed to start and measure, then 18 s watched
  const std::vector<std::string> more{"--status-port", "29612", "launch.straggler_window=6", "--", worker};
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0, 1), more), dir / "node0");
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1, 1), more), dir / "node1");
  // Both ranks measured (a rate each), then three more windows without a flag.
  const bool measured = wait_until(
      [&] {
        const nlohmann::json status = host_status_json(hosts, dir);
        if (!status.is_object() || status["ranks"].size() != 2) return false;
        for (const auto& rank : status["ranks"]) {
          if (!rank["step_rate"].is_number()) return false;
        }
        return true;
      },
      45s);
  INFO("node 0 stderr:\n" << node0.err() << "\nnode 1 stderr:\n" << node1.err());
  REQUIRE(measured);
  const auto until = Clock::now() + 18s;
  while (Clock::now() < until) {
    const nlohmann::json status = host_status_json(hosts, dir);
    CHECK_FALSE(flagged(status, 0));
    CHECK_FALSE(flagged(status, 1));
    std::this_thread::sleep_for(1s);
  }
  CHECK(node0.err().find("is a straggler") == std::string::npos);
}

TEST_CASE("recovery measured: a rank killed on node 1, the restart's phases in seconds from the fault and steps lost",
          "[multinode][status][recovery]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  // Every rank steps every 20 ms and writes its progress; attempt 0 runs until rank 3 is killed, attempt 1 for 8 s.
  const std::string worker = write_script(dir / "steps.sh", R"SH(
seconds=60
[ "$TORCHELASTIC_RESTART_COUNT" = 1 ] && seconds=8
exec python3 - $seconds <<'EOF'
import os, sys, time
path = os.environ["MGTRAIN_HEARTBEAT_FILE"]
start = time.monotonic()
step = 0
while time.monotonic() - start < float(sys.argv[1]):
    step += 1
    time.sleep(max(0.0, start + step * 0.02 - time.monotonic()))
    with open(path + ".tmp", "w") as f:
        f.write('{"step":%d,"loss":1.5,"time":%f}\n' % (step, time.time()))
    os.replace(path + ".tmp", path)
EOF
)SH");
  const std::vector<std::string> more{"--max-restarts", "1", "--status-port", "29613", "--", worker};
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0), more), dir / "node0");
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1), more), dir / "node1");
  // Once every rank has stepped, SIGKILL rank 3 (on node 1).
  long victim = 0;
  const bool stepping = wait_until(
      [&] {
        const nlohmann::json status = host_status_json(hosts, dir);
        if (!status.is_object() || status["ranks"].size() != 4) return false;
        for (const auto& rank : status["ranks"]) {
          if (!rank["step"].is_number() || rank["step"].get<long>() < 20) return false;
          if (rank["rank"] == 3) victim = rank["pid"].get<long>();
        }
        return true;
      },
      45s);
  INFO("node 0 stderr:\n" << node0.err() << "\nnode 1 stderr:\n" << node1.err());
  REQUIRE(stepping);
  REQUIRE(kill(static_cast<pid_t>(victim), SIGKILL) == 0);
  // The host's status API shows the recovery once the restarted round has stepped.
  nlohmann::json last_recovery;
  CHECK(wait_until(
      [&] {
        const nlohmann::json status = host_status_json(hosts, dir);
        if (!status.is_object() || !status.contains("last_recovery") || status["last_recovery"].is_null()) return false;
        last_recovery = status["last_recovery"];
        return true;
      },
      30s));
  CAPTURE(last_recovery.dump());
  CHECK(last_recovery["round"] == 0);
  CHECK(last_recovery["first_step_s"].get<double>() >= last_recovery["rendezvous_s"].get<double>());
  CHECK(node0.wait(60s) == 0);
  CHECK(node1.wait(60s) == 0);
  // The host's console line and run.json's recovery of round 0: every phase after the one before it.
  CHECK_THAT(node0.err(),
             Catch::Contains("mgtrain: recovery from round 0's failure (rank 3 (local rank 1) on node 1") &&
                 Catch::Contains("first step +") && Catch::Contains(" lost"));
  const nlohmann::json record = job_record(dir);
  REQUIRE(record.is_object());
  REQUIRE(record["rounds"].size() == 2);
  const nlohmann::json& recovery = record["rounds"][0]["recovery"];
  CAPTURE(recovery.dump());
  REQUIRE(recovery.is_object());
  const double detected = recovery["detected_s"].get<double>(), stopped = recovery["stopped_s"].get<double>();
  const double rendezvous = recovery["rendezvous_s"].get<double>(), first = recovery["first_step_s"].get<double>();
  CHECK(0 <= detected);
  CHECK(detected <= stopped);
  CHECK(stopped <= rendezvous);
  CHECK(rendezvous <= first);
  CHECK(recovery["fault"].get<double>() <= record["rounds"][1]["start"].get<double>());
  CHECK(recovery["last_step"].get<long>() >= 20);
  // Attempt 1 starts again at step 1 (this worker keeps no checkpoint): every step of attempt 0 is lost.
  CHECK(recovery["resumed_step"].get<long>() >= 0);
  CHECK(recovery["steps_lost"].get<long>() == recovery["last_step"].get<long>() - recovery["resumed_step"].get<long>());
  CHECK_FALSE(record["rounds"][1].contains("recovery"));  // the last round ended well
}

TEST_CASE("recovery measured with the built-in trainer: the steps lost are counted from where the workers resumed",
          "[multinode][status][recovery][trainer]") {
  if (!file_exists(std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker")) {
    WARN("SKIP: mgtrain-worker is not built (configured with -DMGTRAIN_BUILD_WORKER=OFF)");
    return;
  }
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  // The bench config keeps no checkpoints; here every 100 steps, in a folder both "hosts" see.
  const std::vector<std::string> more{std::string(MGTRAIN_SOURCE_DIR) + "/configs/bench/mlp-64.yaml",
                                      "train.max_steps=8000",
                                      "checkpoint.every_steps=100",
                                      "checkpoint.dir=" + (dir / "checkpoints"),
                                      "log.every_steps=1000",
                                      "data.synthetic_samples=4096",
                                      "ddp.connect_timeout_s=30",
                                      "data.loader_threads=0",
                                      "--max-restarts",
                                      "1",
                                      "--status-port",
                                      "29614"};
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0, 1), more), dir / "node0", {"OMP_NUM_THREADS=1"});
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1, 1), more), dir / "node1", {"OMP_NUM_THREADS=1"});
  long victim = 0;
  const bool past_checkpoints = wait_until(
      [&] {
        const nlohmann::json status = host_status_json(hosts, dir);
        if (!status.is_object() || status["ranks"].size() != 2) return false;
        const auto& rank1 = status["ranks"][1];
        if (!rank1["step"].is_number() || rank1["step"].get<long>() < 300) return false;
        victim = rank1["pid"].get<long>();
        return true;
      },
      90s);
  INFO("node 0 stderr:\n" << node0.err() << "\nnode 1 stderr:\n" << node1.err());
  REQUIRE(past_checkpoints);
  REQUIRE(kill(static_cast<pid_t>(victim), SIGKILL) == 0);
  CHECK(node0.wait(120s) == 0);
  CHECK(node1.wait(120s) == 0);
  const nlohmann::json record = job_record(dir);
  REQUIRE(record.is_object());
  REQUIRE(record["rounds"].size() == 2);
  const nlohmann::json& recovery = record["rounds"][0]["recovery"];
  CAPTURE(recovery.dump());
  REQUIRE(recovery.is_object());
  CHECK(recovery["resumed_step_from"] == "workers");  // the trainer says where it resumed ("start")
  const long resumed = recovery["resumed_step"].get<long>(), last = recovery["last_step"].get<long>();
  CHECK(resumed >= 100);  // a checkpoint's step: a periodic one, or the one rank 0 saved when it was stopped
  // The highest step reported before the fault is a lower bound (reports come every 2 s): a checkpoint saved at the
  // stop may be newer than it, and then nothing was lost.
  CHECK(last >= 300);
  CHECK(recovery["steps_lost"].get<long>() == std::max(0L, last - resumed));
  CHECK(recovery["first_step_s"].get<double>() >= recovery["rendezvous_s"].get<double>());
  // The resumed workers said so in their own logs too, and which copy it was: a snapshot in memory (every 50 steps)
  // or the checkpoint rank 0 saved when it was stopped.
  const std::string resumed_log = read_text(rank_log(dir, 0, 1, 0));
  CHECK_THAT(resumed_log,
             Catch::Contains("resumed from ") && Catch::Contains(": step " + std::to_string(resumed) + ","));
  const bool from_memory = resumed_log.find("resumed from the snapshot in memory") != std::string::npos;
  CHECK(recovery["resumed_from"] == (from_memory ? "snapshot" : "checkpoint"));
}

TEST_CASE("stacks across nodes: status --stacks on the host dumps every rank of both nodes, and the job goes on",
          "[multinode][status][stacks]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  if (access("/usr/bin/python3", X_OK) != 0) {
    WARN("skipped: no /usr/bin/python3 for the workers");
    return;
  }
  TempDir dir;
  // Rank 3 (node 1) waits inside waiting_for_the_release_file(), the others in the module's own loop: two places.
  const std::string worker = write_script(dir / "w.sh",
                                          "exec /usr/bin/python3 - <<'EOF'\n"
                                          "import os, time\n"
                                          "test_dir = '" +
                                              dir.path() + "'\n" + R"PY(
rank = int(os.environ["RANK"])
release = os.path.join(test_dir, "release")
def waiting_for_the_release_file():
    while not os.path.exists(release):
        time.sleep(0.02)
open(os.path.join(test_dir, f"ready_{rank}"), "w").close()
if rank == 3:
    waiting_for_the_release_file()
else:
    while not os.path.exists(release):
        time.sleep(0.02)
print(f"rank {rank} finished", flush=True)
EOF
)PY");
  const std::vector<std::string> more{"--status-port", "29611", "--", worker};
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0), more), dir / "node0");
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1), more), dir / "node1");
  INFO("node 0 stderr:\n" << node0.err() << "\nnode 1 stderr:\n" << node1.err());
  REQUIRE(wait_until(
      [&] {
        for (int rank = 0; rank < 4; ++rank) {
          if (!file_exists(dir / ("ready_" + std::to_string(rank)))) return false;
        }
        int attempt = -1;
        return host_status(hosts, dir, attempt).size() == 4;
      },
      60s));
  std::vector<std::string> argv = hosts.exec_prefix(0);
  argv.insert(argv.end(), {kMgtrain, "status", "mn", "--log-dir", dir / "runs", "--stacks"});
  mgtrain::CaptureOptions options;
  options.timeout_s = 90;
  const mgtrain::CapturedRun stacks = mgtrain::run_and_capture(argv, options);
  INFO("status --stacks:\n" << stacks.out << stacks.err);
  REQUIRE(stacks.exit_code == 0);
  CHECK_THAT(stacks.out, Catch::Contains("4 ranks on 2 nodes dumped"));
  // Grouped by identical top frames: rank 3 alone, the other three together.
  CHECK_THAT(stacks.out, Catch::Contains("2 places (ranks with identical top frames together):"));
  CHECK_THAT(stacks.out, Catch::Contains("rank 3 (1): waiting_for_the_release_file ("));
  CHECK_THAT(stacks.out, Catch::Contains("(3): <module> ("));
  CHECK_THAT(stacks.out, Catch::Contains("rank 3 (node 1 on ") && Catch::Contains("rank 0 (node 0 on "));
  CHECK_THAT(stacks.out, !Catch::Contains("note: node"));
  // Each node wrote its own ranks' files into its own run folder.
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    const std::string file = dir / ("runs/mn/node_" + std::to_string(rank / 2) + "/attempt_0/rank_" +
                                    std::to_string(rank) + "/stacks-1.txt");
    CHECK(file_exists(file));
    CHECK_THAT(stacks.out, Catch::Contains(file));
  }
  CHECK_THAT(read_text(dir / "runs/mn/node_1/attempt_0/rank_3/stacks-1.txt"),
             Catch::Contains("waiting_for_the_release_file"));
  // The job went on: released, every rank finishes and both agents exit 0.
  std::ofstream(dir / "release").close();
  CHECK(node0.wait(30s) == 0);
  CHECK(node1.wait(30s) == 0);
  for (int rank = 0; rank < 4; ++rank) {
    CHECK_THAT(read_text(rank_log(dir, rank / 2, 0, rank)), Catch::Contains("finished"));
  }
}
