// Snapshots in memory across nodes (docs/checkpoints.md#snapshots-in-memory), with real processes in network
// namespaces (netns_hosts.hpp): an elastic job of 2 nodes (--nnodes 2:2) running the built-in trainer, a third node
// waiting as a standby. Node B's agent is SIGKILLed (its workers die with it); the standby takes its place, and the new
// round resumes from the snapshot node A's rank holds, sent to the standby's rank, which has none: not from the
// newest file, and not from scratch.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launch_fixture.hpp"
#include "multinode_job.hpp"
#include "netns_agent.hpp"
#include "netns_hosts.hpp"
#include "process/run_capture.hpp"

using namespace mgtrain::testing;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

// An elastic job of 2 nodes (--nnodes 2:2) and a standby, one rank each: the built-in trainer with a file every 1000
// steps (none before the faults), a snapshot every 20; Gloo over the namespaces' network; the host's status API.
std::vector<std::string> elastic_job_flags(const NetnsHosts& hosts, const TempDir& dir) {
  return {"--nnodes",
          "2:2",
          "--rdzv-endpoint",
          hosts.address(0) + ":29400",
          "--rdzv-id",
          "mn",
          "--nproc",
          "1",
          "--log-dir",
          dir / "runs",
          "--grace-period",
          "1",
          "--join-timeout",
          "30",
          "--last-call-timeout",
          "1",
          "--node-timeout",
          "4",
          "--max-restarts",
          "2",
          "--hang-timeout",  // progress files: the host's recovery record reads them
          "120",
          std::string(MGTRAIN_SOURCE_DIR) + "/configs/bench/mlp-64.yaml",
          "train.max_steps=3000",
          "data.synthetic_samples=4096",
          "data.loader_threads=0",
          "checkpoint.every_steps=1000",
          "checkpoint.every_epochs=0",
          "checkpoint.dir=" + (dir / "checkpoints"),
          "checkpoint.snapshot_every=20",
          "log.every_steps=50",
          "ddp.connect_timeout_s=30",
          "--status-port",
          "29613"};
}

// The job's host's /status JSON (`mgtrain status --json` in its namespace); null when it does not answer.
nlohmann::json host_status(const NetnsHosts& hosts, const TempDir& dir) {
  std::vector<std::string> argv = hosts.exec_prefix(0);
  argv.insert(argv.end(),
              {std::string(MGTRAIN_BIN_DIR) + "/mgtrain", "status", "mn", "--log-dir", dir / "runs", "--json"});
  mgtrain::CaptureOptions options;
  options.timeout_s = 20;
  const mgtrain::CapturedRun run = mgtrain::run_and_capture(argv, options);
  if (run.exit_code != 0) return nullptr;
  return nlohmann::json::parse(run.out, nullptr, false);
}

// The step of the replica of `rank` that node `node_rank` holds, as the host's /status says; -1: none.
long long replica_step(const nlohmann::json& status, int node_rank, int rank) {
  if (!status.is_object() || !status.contains("replication")) return -1;
  for (const nlohmann::json& node : status["replication"]) {
    if (node.value("node_rank", -1) != node_rank) continue;
    for (const nlohmann::json& held : node["held"]) {
      if (held.value("rank", -1) == rank) return held.value("step", -1LL);
    }
  }
  return -1;
}

int last_step(const std::string& text) {
  const std::size_t at = text.rfind("mgtrain: step ");
  return at == std::string::npos ? -1 : std::atoi(text.c_str() + at + 14);
}

// The job running: A and B in round 0 (A with `env_a` added), C waiting as the standby, rank 0 past `step`.
struct StandbyJob {
  std::unique_ptr<Agent> a, b, c;

  StandbyJob(const NetnsHosts& hosts, const TempDir& dir, const std::vector<std::string>& env_a, int step) {
    const std::vector<std::string> flags = elastic_job_flags(hosts, dir);
    const std::vector<std::string> env = {"OMP_NUM_THREADS=1", "MGTRAIN_SHM_ALLREDUCE=0"};
    std::vector<std::string> a_env = env;
    a_env.insert(a_env.end(), env_a.begin(), env_a.end());
    a = std::make_unique<Agent>(hosts, 0, flags, dir / "a", a_env);
    b = std::make_unique<Agent>(hosts, 1, flags, dir / "b", env);
    REQUIRE(wait_until([&] { return a->err().find("round 0: node 0 (") != std::string::npos; }, 60s));
    c = std::make_unique<Agent>(hosts, 2, flags, dir / "c", env);
    const bool ready = wait_until(
        [&] { return c->err().find("waits as a standby") != std::string::npos && last_step(a->out()) >= step; }, 90s);
    INFO(consoles());
    REQUIRE(ready);
  }
  std::string consoles() const {
    return "a stderr:\n" + a->err() + "\nb stderr:\n" + b->err() + "\nc stderr:\n" + c->err();
  }
  // Node B lost (its agent SIGKILLed, its worker with it): A and C end the job.
  void lose_b() {
    REQUIRE(kill(b->pid(), SIGKILL) == 0);
    CHECK(a->wait(120s) == 0);
    CHECK(c->wait(120s) == 0);
    b->wait(1s);
  }
};

}  // namespace

TEST_CASE("a node lost: the standby's rank gets the snapshot of the surviving rank and the job goes on from it",
          "[multinode][snapshot][standby]") {
  if (!file_exists(std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker")) {
    WARN("SKIP: mgtrain-worker is not built (configured with -DMGTRAIN_BUILD_WORKER=OFF)");
    return;
  }
  NetnsHosts hosts(3);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  // A file every 1000 steps (none before the fault), a snapshot every 20; Gloo over the namespaces' network.
  StandbyJob job(hosts, dir, {}, 300);
  Agent& a = *job.a;
  INFO(job.consoles());
  const int reached = last_step(a.out());  // rank 0's lines reach node A's console
  job.lose_b();
  // Node A's output has the round that resumed: its rank 0 (the holder) says where from.
  const std::string out = a.out();
  INFO("a stdout:\n" << out);
  std::smatch m;
  REQUIRE(std::regex_search(out, m,
                            std::regex(R"(resumed from the snapshot in memory of rank ([0-9]+) \(sent to the ranks )"
                                       R"(that lack it\): step ([0-9]+),)")));
  const int resumed = std::stoi(m[2].str());
  CHECK(resumed % 20 == 0);
  CHECK(resumed >= reached / 20 * 20);  // rank 0 logs a step after its snapshot of that step
  CHECK(resumed < 1000);                // no file yet: only the snapshot could give this
  CHECK_THAT(out, Catch::Contains("mgtrain: step 3000/3000"));
  // run.json (node A hosts the job) says where the new round resumed and from which copy.
  const nlohmann::json record = job_record(dir);
  REQUIRE(record.is_object());
  REQUIRE(record["rounds"].size() == 2);
  const nlohmann::json& recovery = record["rounds"][0]["recovery"];
  CAPTURE(recovery.dump());
  REQUIRE(recovery.is_object());
  CHECK(recovery["resumed_step"] == resumed);
  CHECK(recovery["resumed_from"] == "snapshot");
  CHECK_THAT(a.err(), Catch::Contains("(a snapshot in memory)"));
}

TEST_CASE(
    "a node lost with the newest state: its buddy's replica is newer than anything the survivor holds, and the "
    "job resumes from it",
    "[multinode][snapshot][replica]") {
  if (!file_exists(std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker")) {
    WARN("SKIP: mgtrain-worker is not built (configured with -DMGTRAIN_BUILD_WORKER=OFF)");
    return;
  }
  NetnsHosts hosts(3);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  const std::string pause = dir / "pause";
  // Node A's rank stops for good in the middle of writing a snapshot once the pause file appears: its newest complete
  // snapshot stays the one before. Rank 1 (node B) completes that snapshot, and B's launcher sends it to A's.
  StandbyJob job(hosts, dir, {"MGTRAIN_TEST_SNAPSHOT_PAUSE_FILE=" + pause}, 200);
  const Agent &a = *job.a, &b = *job.b;
  INFO(job.consoles());
  std::ofstream(pause).close();
  // Rank 0's log of round 0, in node A's folder (a dynamic node's is agent_<host>_<pid>/).
  const auto rank0_err = [&] {
    std::string text;
    for (const auto& node : std::filesystem::directory_iterator(dir / "runs" + "/mn")) {
      const std::string log = node.path().string() + "/attempt_0/rank_0/stderr.log";
      if (file_exists(log)) text += read_text(log);
    }
    return text;
  };
  int paused = -1;
  REQUIRE(wait_until(
      [&] {
        const std::string log = rank0_err();
        const std::size_t at = log.find("snapshot write paused at step ");
        if (at != std::string::npos) paused = std::atoi(log.c_str() + at + 30);
        return paused > 0;
      },
      60s));
  // The host's status: node 0 holds node 1's snapshot of the step its own rank never completed.
  nlohmann::json status;
  const bool replicated = wait_until(
      [&] {
        status = host_status(hosts, dir);
        return replica_step(status, 0, 1) == paused;
      },
      60s);
  INFO("status: " << status.dump());
  REQUIRE(replicated);
  job.lose_b();
  const std::string out = a.out();
  INFO("a stdout:\n" << out);
  CHECK_THAT(out, Contains("resumed from the replica of rank 1's snapshot that rank 0's node holds (sent to every "
                           "rank): step " +
                           std::to_string(paused) + ","));
  CHECK_THAT(out, Contains("mgtrain: step 3000/3000"));
  // run.json (node A hosts the job): each node's replication as last heard, node 0's sent to its buddy.
  const nlohmann::json record = job_record(dir);
  REQUIRE(record.is_object());
  REQUIRE(record.contains("replication"));
  CAPTURE(record["replication"].dump());
  bool node0_sent = false;
  for (const nlohmann::json& node : record["replication"]) {
    if (node["node_rank"] == 0 && node["sent"].get<long long>() > 0 && !node["sent_step"].is_null()) node0_sent = true;
  }
  CHECK(node0_sent);
  // The replication's lines on the consoles: where each node's snapshots went, and what each sent at the end.
  CHECK_THAT(a.err(), Contains("snapshot replication: this node's snapshots in memory go to node 1 ("));
  CHECK_THAT(b.err(), Contains("snapshot replication: this node's snapshots in memory go to node 0 ("));
  CHECK_THAT(a.err(), Contains("snapshot replication: sent "));
}
