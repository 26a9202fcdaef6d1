// Multi-node jobs for real: node agents (`mgtrain launch`) in Linux network namespaces that stand in
// for hosts (netns_hosts.hpp), talking over veth links. Static ranks, agreement errors, the join
// timeout, fate sharing with global restarts, a cut link, the dynamic rendezvous, and the trainer
// doing DDP across "hosts". Skips (saying why) where namespaces cannot be made.
#include <catch2/catch.hpp>

#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "host/port_probe.hpp"

#include "launch_fixture.hpp"
#include "multinode_job.hpp"
#include "netns_agent.hpp"
#include "netns_hosts.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {
const char* kEnvScript =
    "echo \"RANK=$RANK LOCAL_RANK=$LOCAL_RANK GROUP_RANK=$GROUP_RANK WORLD_SIZE=$WORLD_SIZE "
    "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_WORLD_SIZE=$GROUP_WORLD_SIZE MASTER_ADDR=$MASTER_ADDR "
    "MASTER_PORT=$MASTER_PORT RESTART=$TORCHELASTIC_RESTART_COUNT RUN_ID=$TORCHELASTIC_RUN_ID "
    "OMP=${OMP_NUM_THREADS:-unset}\"";

// The OMP_NUM_THREADS each of `workers` workers on this machine's CPUs gets (the launchers inherit this process's
// affinity mask; this machine's cgroup sets no quota where the suite runs, or the launcher would divide fewer).
std::string threads_for(int workers) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  REQUIRE(sched_getaffinity(0, sizeof cpus, &cpus) == 0);
  return std::to_string(std::max(CPU_COUNT(&cpus) / workers, 1));
}

}  // namespace

TEST_CASE("static: two nodes x two workers get torchrun's ranks in node order and one workers' store",
          "[multinode][static]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  std::string worker = write_script(dir / "env.sh", kEnvScript);
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1), {"--", worker}), dir / "node1");  // before node 0: it waits
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0), {"--", worker}), dir / "node0");
  REQUIRE(node0.wait(20s) == 0);
  REQUIRE(node1.wait(20s) == 0);
  std::set<std::string> ports;
  for (int rank = 0; rank < 4; ++rank) {
    auto fields = fields_of(read_text(rank_log(dir, rank / 2, 0, rank)));
    CHECK(fields["RANK"] == std::to_string(rank));
    CHECK(fields["LOCAL_RANK"] == std::to_string(rank % 2));
    CHECK(fields["GROUP_RANK"] == std::to_string(rank / 2));
    CHECK(fields["WORLD_SIZE"] == "4");
    CHECK(fields["LOCAL_WORLD_SIZE"] == "2");
    CHECK(fields["GROUP_WORLD_SIZE"] == "2");
    CHECK(fields["MASTER_ADDR"] == hosts.address(0));
    CHECK(fields["RESTART"] == "0");
    CHECK(fields["RUN_ID"] == "mn");
    // Both namespaces run on this machine's CPUs (one kernel, one affinity mask): 4 workers share them.
    CHECK(fields["OMP"] == threads_for(4));
    ports.insert(fields["MASTER_PORT"]);
  }
  REQUIRE(ports.size() == 1);        // one store for the whole job ...
  CHECK(*ports.begin() != "29500");  // ... on a port node 0 picked, not the rendezvous port
  CHECK_THAT(node1.out(), Catch::Contains("[rank 3] RANK=3"));
  CHECK_THAT(node0.err(), Catch::Contains("hosting the rendezvous on port 29500"));
  CHECK_THAT(node1.err(), Catch::Contains("round 0: node 1 (") && Catch::Contains("(ranks 2-3 of 4)"));
  CHECK(file_exists(dir / "runs/mn/node_0/config.yaml"));
  CHECK(file_exists(dir / "runs/mn/node_1/config.yaml"));
}

TEST_CASE("static: the trainer runs DDP across two namespaces: shared memory on one machine, else Gloo between hosts",
          "[multinode][static][trainer]") {
  if (!file_exists(std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker")) {
    WARN("SKIP: mgtrain-worker is not built (configured with -DMGTRAIN_BUILD_WORKER=OFF)");
    return;
  }
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  std::string config = std::string(MGTRAIN_SOURCE_DIR) + "/configs/bench/mlp-64.yaml";
  std::vector<std::string> training = {config,
                                       "train.max_steps=30",
                                       "log.every_steps=10",
                                       "data.synthetic_samples=4096",
                                       "ddp.connect_timeout_s=30",
                                       "data.loader_threads=0"};
  // The namespaces are nodes of one machine: their ranks find rank 0's segment in the one /dev/shm and sum through it.
  // With it off (MGTRAIN_SHM_ALLREDUCE=0), as between real hosts, every sum crosses the network through Gloo.
  for (const auto& [environment, backend] :
       {std::pair<std::vector<std::string>, std::string>{{}, "gloo+shm"}, {{"MGTRAIN_SHM_ALLREDUCE=0"}, "gloo"}}) {
    TempDir dir;
    Agent node0(hosts, 0, with(static_flags(hosts, dir, 0), training), dir / "node0", environment);
    Agent node1(hosts, 1, with(static_flags(hosts, dir, 1), training), dir / "node1", environment);
    int code0 = node0.wait(120s), code1 = node1.wait(120s);
    INFO("node 0 stderr:\n" << node0.err() << "\nnode 1 stderr:\n" << node1.err());
    REQUIRE(code0 == 0);
    REQUIRE(code1 == 0);
    std::string summary;
    for (const std::string& line : mgtrain::split_lines(read_text(rank_log(dir, 0, 0, 0)))) {
      if (line.rfind("{\"summary\"", 0) == 0) summary = line;
    }
    REQUIRE_FALSE(summary.empty());
    YAML::Node parsed = YAML::Load(summary)["summary"];
    CHECK(parsed["world_size"].as<int>() == 4);
    CHECK(parsed["steps"].as<int>() == 30);
    CHECK(parsed["backend"].as<std::string>() == backend);
    CHECK_THAT(node0.err() + node0.out(), !Catch::Contains("shared-memory all-reduce not available"));
  }
}

TEST_CASE("static: a different --nproc is a clear error on both nodes, not a hang", "[multinode][static][agreement]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  std::string marker = dir / "started";
  std::string worker = write_script(dir / "w.sh", "touch " + marker);
  auto started = Clock::now();
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0, 2), {"--", worker}), dir / "node0");
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1, 4), {"--", worker}), dir / "node1");
  CHECK(node0.wait(25s) == 2);
  CHECK(node1.wait(25s) == 2);
  CHECK(seconds_since(started) < 15);  // not a hang until the join timeout (20 s); generous for a loaded machine
  for (const std::string& err : {node0.err(), node1.err()}) {
    CHECK_THAT(err,
               Catch::Contains("mgtrain: error: node 1 (") &&
                   Catch::Contains(hosts.address(1) + ") has --nproc 4, node 0 (") &&
                   Catch::Contains(") has --nproc 2; pass the same --nproc on every node, or --allow-uneven-nproc"));
  }
  CHECK_FALSE(file_exists(marker));
}

TEST_CASE("static: uneven --nproc with --allow-uneven-nproc gives ranks in node order", "[multinode][static]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  std::string worker = write_script(dir / "env.sh", kEnvScript);
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0, 1), {"--allow-uneven-nproc", "--", worker}), dir / "node0");
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1, 3), {"--allow-uneven-nproc", "--", worker}), dir / "node1");
  REQUIRE(node0.wait(20s) == 0);
  REQUIRE(node1.wait(20s) == 0);
  CHECK(fields_of(read_text(rank_log(dir, 0, 0, 0)))["WORLD_SIZE"] == "4");
  for (int rank = 1; rank <= 3; ++rank) {
    auto fields = fields_of(read_text(rank_log(dir, 1, 0, rank)));
    CHECK(fields["LOCAL_RANK"] == std::to_string(rank - 1));
    CHECK(fields["LOCAL_WORLD_SIZE"] == "3");
  }
}

TEST_CASE("static: a node started without a run id adopts node 0's, config paths included", "[multinode][static]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  std::string worker = write_script(dir / "env.sh", std::string(kEnvScript) + "; echo \"CONFIG=$MGTRAIN_CONFIG_FILE\"");
  auto flags1 = static_flags(hosts, dir, 1);
  flags1.erase(std::find(flags1.begin(), flags1.end(), "--run-id"),
               std::find(flags1.begin(), flags1.end(), "--run-id") + 2);
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0), {"--", worker}), dir / "node0");
  Agent node1(hosts, 1, with(flags1, {"--", worker}), dir / "node1");
  REQUIRE(node0.wait(20s) == 0);
  REQUIRE(node1.wait(20s) == 0);
  CHECK_THAT(node1.err(), Catch::Contains("using run id mn of the other nodes"));
  CHECK(fields_of(read_text(rank_log(dir, 1, 0, 3)))["RUN_ID"] == "mn");
  CHECK_THAT(read_text(dir / "runs/mn/node_1/config.yaml"), Catch::Contains("run_id: mn"));
}

TEST_CASE("static: Ctrl-C on one node's agent stops every node, a killed agent is a lost node", "[multinode][static]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  std::string worker = write_script(dir / "w.sh", "touch \"$MGTRAIN_RUN_DIR/../up_$RANK\"; sleep 60");
  {
    Agent node0(hosts, 0, with(static_flags(hosts, dir, 0), {"--", worker}), dir / "node0");
    Agent node1(hosts, 1, with(static_flags(hosts, dir, 1), {"--", worker}), dir / "node1");
    REQUIRE(wait_until([&] { return file_exists(dir / "runs/mn/up_0") && file_exists(dir / "runs/mn/up_3"); }, 20s));
    auto interrupted = Clock::now();
    kill(node1.pid(), SIGINT);
    CHECK(node1.wait(15s) == 130);
    CHECK(node0.wait(15s) == 130);
    CHECK(seconds_since(interrupted) < 6);
    CHECK_THAT(node0.err(), Catch::Contains("failure    was stopped by SIGINT"));
  }
  std::remove((dir / "runs/mn/up_0").c_str());
  std::remove((dir / "runs/mn/up_3").c_str());
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0), {"--", worker}), dir / "node0b");
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1), {"--", worker}), dir / "node1b");
  REQUIRE(wait_until([&] { return file_exists(dir / "runs/mn/up_0") && file_exists(dir / "runs/mn/up_3"); }, 20s));
  kill(node1.pid(), SIGKILL);  // its workers die with it (death signal, orphan guard)
  CHECK(node0.wait(15s) == 69);
  CHECK_THAT(node0.err(), Catch::Contains("failure    closed the connection"));
  CHECK(wait_until([&] { return live_job_processes({}, dir / "w.sh").empty(); }, 5s));
}

TEST_CASE("static: the join timeout names the node ranks that arrived and those that did not",
          "[multinode][static][timeout]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  auto flags = with(static_flags(hosts, dir, 0), {"--join-timeout", "1.5", "--", "true"});
  auto started = Clock::now();
  Agent node0(hosts, 0, flags, dir / "node0");
  CHECK(node0.wait(15s) == 69);
  CHECK(seconds_since(started) < 6);
  CHECK_THAT(node0.err(), Catch::Contains("not every node arrived within launch.join_timeout (1.5 s)") &&
                              Catch::Contains("missing: node rank 1"));
  // A node whose rendezvous server never appears says whom it could not reach.
  Agent lonely(hosts, 1, with(static_flags(hosts, dir, 1), {"--join-timeout", "1", "--", "true"}), dir / "node1");
  CHECK(lonely.wait(15s) == 69);
  CHECK_THAT(lonely.err(), Catch::Contains("could not reach the rendezvous server at " + hosts.address(0) +
                                           ":29500 within "
                                           "launch.join_timeout (1 s)"));
}

TEST_CASE("fate sharing: a worker killed on node 1 stops node 0 within seconds, both restart and finish",
          "[multinode][fate]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  // Attempt 0: rank 3 dies by SIGKILL once everyone runs, the others would sleep for a minute.
  // Attempt 1: everyone finishes at once.
  std::string worker = write_script(dir / "w.sh",
                                    "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ]; then echo done $RANK; exit 0; fi\n"
                                    "if [ \"$RANK\" = 3 ]; then sleep 0.5; kill -9 $$; fi\n"
                                    "sleep 60");
  auto started = Clock::now();
  auto flags0 = with(static_flags(hosts, dir, 0), {"--max-restarts", "1", "--", worker});
  auto flags1 = with(static_flags(hosts, dir, 1), {"--max-restarts", "1", "--", worker});
  Agent node0(hosts, 0, flags0, dir / "node0");
  Agent node1(hosts, 1, flags1, dir / "node1");
  int code0 = node0.wait(30s), code1 = node1.wait(30s);
  INFO("node 0 stderr:\n" << node0.err() << "\nnode 1 stderr:\n" << node1.err());
  CHECK(code0 == 0);
  CHECK(code1 == 0);
  CHECK(seconds_since(started) < 15);  // not the workers' 60 s sleep
  for (int rank = 0; rank < 4; ++rank)
    CHECK(read_text(rank_log(dir, rank / 2, 1, rank)) == "done " + std::to_string(rank) + "\n");
  CHECK_THAT(node0.err(), Catch::Contains("stopping the workers of node 0 (") &&
                              Catch::Contains("): rank 3 (local rank 1) on node 1"));
  CHECK_THAT(node0.err(), Catch::Contains("round 1: node 0"));
  // run.json, kept by the node that hosts the rendezvous: both rounds, why the first ended, the nodes.
  const nlohmann::json record = job_record(dir);
  REQUIRE(record.is_object());
  CHECK(record["status"] == "succeeded");
  CHECK(record["nnodes"] == 2);
  CHECK(record["world_size"] == 4);
  REQUIRE(record["nodes"].size() == 2);
  CHECK(record["nodes"][1]["address"] == hosts.address(1));
  CHECK(record["nodes"][1]["first_rank"] == 2);
  REQUIRE(record["rounds"].size() == 2);
  CHECK(record["rounds"][0]["ended_by"] == "failure");
  CHECK_THAT(record["rounds"][0]["cause"].get<std::string>(), Catch::Contains("rank 3 (local rank 1) on node 1"));
  CHECK(record["rounds"][1]["started_by"] == "restart");
  CHECK(record["rounds"][1]["ended_by"] == "finished");
  CHECK(record["rounds"][1]["end"].get<double>() >= record["rounds"][1]["start"].get<double>());
}

TEST_CASE("fate sharing without restarts: every node exits with the root cause's code and names it",
          "[multinode][fate]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  std::string worker = write_script(dir / "w.sh",
                                    "if [ \"$RANK\" = 2 ]; then sleep 0.5; echo 'bad batch' >&2; exit 7; fi\n"
                                    "sleep 60");
  auto started = Clock::now();
  // Each node (a pod) writes the root cause to its own termination log (docs/launch.md#termination-message).
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0), {"--termination-log", dir / "term0", "--", worker}),
              dir / "node0");
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1), {"--termination-log", dir / "term1", "--", worker}),
              dir / "node1");
  CHECK(node0.wait(30s) == 7);
  CHECK(node1.wait(30s) == 7);
  CHECK(seconds_since(started) < 12);
  for (const char* file : {"term0", "term1"}) {
    CHECK_THAT(read_text(dir / file),
               Catch::StartsWith("mgtrain: run mn failed (exit code 7): rank 2 (local rank 0) on "
                                 "node 1 (") &&
                   Catch::EndsWith("): exit code 7: bad batch\n"));
  }
  for (const std::string& err : {node0.err(), node1.err()}) {
    CHECK_THAT(err, Catch::Contains("rank       2 (local rank 0) on node 1 (") &&
                        Catch::Contains("failure    exit code 7") && Catch::Contains("| bad batch"));
  }
  for (int node : {0, 1}) {
    YAML::Node report = YAML::Load(read_text(dir / ("runs/mn/node_" + std::to_string(node) + "/failure.json")));
    CHECK(report["exit_code"].as<int>() == 7);
    CHECK(report["root_cause"]["global_rank"].as<int>() == 2);
    CHECK(report["root_cause"]["node_rank"].as<int>() == 1);
    CHECK_FALSE(report["root_cause"]["node_lost"].as<bool>());
  }
}

TEST_CASE("workers that saved a checkpoint and stopped (exit 75) on every node end the job with 75, no restart",
          "[multinode][fate]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  std::string worker = write_script(dir / "w.sh", "exit 75");
  Agent node0(hosts, 0, with(static_flags(hosts, dir, 0), {"--max-restarts", "3", "--", worker}), dir / "node0");
  Agent node1(hosts, 1, with(static_flags(hosts, dir, 1), {"--max-restarts", "3", "--", worker}), dir / "node1");
  CHECK(node0.wait(20s) == 75);
  CHECK(node1.wait(20s) == 75);
  CHECK_FALSE(file_exists(dir / "runs/mn/node_0/attempt_1"));
  CHECK_FALSE(file_exists(dir / "runs/mn/node_0/failure.json"));
  CHECK_THAT(node1.err(),
             Catch::Contains("saved a checkpoint and stopped on request; run the same command on every node"));
}

TEST_CASE("a node's link cut: the other side notices within the node timeout and both exit with a clear report",
          "[multinode][dead]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  std::string worker = write_script(dir / "w.sh", "touch \"$MGTRAIN_RUN_DIR/../up_$RANK\"; sleep 60");
  auto flags0 = with(static_flags(hosts, dir, 0), {"--node-timeout", "2", "--max-restarts", "3", "--", worker});
  auto flags1 = with(static_flags(hosts, dir, 1), {"--node-timeout", "2", "--max-restarts", "3", "--", worker});
  Agent node0(hosts, 0, flags0, dir / "node0");
  Agent node1(hosts, 1, flags1, dir / "node1");
  REQUIRE(wait_until([&] { return file_exists(dir / "runs/mn/up_0") && file_exists(dir / "runs/mn/up_3"); }, 20s));
  auto cut = Clock::now();
  hosts.cut_link(1);
  CHECK(node0.wait(15s) == 69);
  double noticed = seconds_since(cut);
  CHECK(noticed >= 1.5);
  CHECK(noticed < 6);  // node timeout 2 s, grace period 1 s, some slack for busy machines
  CHECK(node1.wait(15s) == 69);
  INFO("node 0 stderr:\n" << node0.err() << "\nnode 1 stderr:\n" << node1.err());
  CHECK_THAT(node0.err(), Catch::Contains("node       node 1 (") && Catch::Contains("failure    sent nothing for 2") &&
                              Catch::Contains("a static job restarts only with all 2 nodes, and node rank 1 is gone"));
  CHECK_THAT(node1.err(),
             Catch::Contains("the rendezvous server at " + hosts.address(0) + ":29500 (node 0) sent nothing for"));
  YAML::Node report = YAML::Load(read_text(dir / "runs/mn/node_0/failure.json"));
  CHECK(report["root_cause"]["node_lost"].as<bool>());
  CHECK(report["root_cause"]["node_rank"].as<int>() == 1);
}

TEST_CASE("dynamic: ranks on arrival, MIN nodes after the last call, a late node scales up, a lost one is left out",
          "[multinode][dynamic]") {
  NetnsHosts hosts(3);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  // Round 0: A (the endpoint's host) and B, closed at MIN after the last call; C comes late and the
  // round restarts with all three (a scale-up: TORCHELASTIC_RESTART_COUNT stays 0). B's agent is then
  // killed: round 2 (restart 1) runs A and C, whose workers finish at once.
  std::string worker =
      write_script(dir / "w.sh", std::string(kEnvScript) +
                                     " > \"$MGTRAIN_RUN_DIR/../env_${TORCHELASTIC_RESTART_COUNT}_$RANK\"\n"
                                     "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then sleep 60; fi");
  const std::vector<std::string> flags = {"--nnodes",
                                          "2:3",
                                          "--rdzv-endpoint",
                                          hosts.address(0) + ":29400",
                                          "--rdzv-backend",
                                          "c10d",
                                          "--rdzv-id",
                                          "mn",
                                          "--nproc",
                                          "1",
                                          "--log-dir",
                                          dir / "runs",
                                          "--grace-period",
                                          "1",
                                          "--join-timeout",
                                          "20",
                                          "--last-call-timeout",
                                          "1",
                                          "--node-timeout",
                                          "4",
                                          "--max-restarts",
                                          "1",
                                          "--",
                                          worker};
  auto started = Clock::now();
  Agent b(hosts, 1, flags, dir / "b");
  Agent a(hosts, 0, flags, dir / "a");
  auto written = [](const std::string& path) {  // the shell creates the file before echo writes the line
    std::string text = read_text(path);
    return !text.empty() && text.back() == '\n';
  };
  REQUIRE(wait_until([&] { return written(dir / "runs/mn/env_0_0") && written(dir / "runs/mn/env_0_1"); }, 20s));
  CHECK(seconds_since(started) >= 1);  // the last call: a third node could still have come
  for (int rank = 0; rank < 2; ++rank) {
    auto fields = fields_of(read_text(dir / ("runs/mn/env_0_" + std::to_string(rank))));
    CHECK(fields["GROUP_RANK"] == std::to_string(rank));
    CHECK(fields["WORLD_SIZE"] == "2");
    CHECK(fields["MASTER_ADDR"] == hosts.address(0));  // the endpoint's host is node 0: its rank 0 hosts the store
    CHECK(fields["RUN_ID"] == "mn");
  }
  // (the agent's console is flushed once per loop turn: its line may come after the workers' files)
  CHECK(wait_until([&] { return a.err().find("round 0: node 0 (") != std::string::npos; }, 5s));
  Agent c(hosts, 2, flags, dir / "c");
  REQUIRE(wait_until([&] { return c.err().find("it restarts to admit this node") != std::string::npos; }, 10s));
  REQUIRE(wait_until([&] { return written(dir / "runs/mn/env_0_2"); }, 20s));
  auto scaled = fields_of(read_text(dir / "runs/mn/env_0_2"));
  CHECK(scaled["GROUP_RANK"] == "2");
  CHECK(scaled["WORLD_SIZE"] == "3");
  kill(b.pid(), SIGKILL);
  CHECK(a.wait(20s) == 0);
  CHECK(c.wait(20s) == 0);
  b.wait(1s);
  INFO("a stderr:\n" << a.err() << "\nc stderr:\n" << c.err());
  auto late = fields_of(read_text(dir / "runs/mn/env_1_1"));
  CHECK(late["GROUP_RANK"] == "1");
  CHECK(late["WORLD_SIZE"] == "2");
  CHECK(late["RESTART"] == "1");
  CHECK_THAT(a.err(), Catch::Contains("closed the connection; stopping the workers of every node") &&
                          Catch::Contains("restarting with 2 nodes (restart 1 of 1)"));
  CHECK_THAT(c.err(), Catch::Contains("round 1: node 2 (") && Catch::Contains("round 2: node 1 ("));
  // The elastic job's run.json, by the agent that hosted the rendezvous: the regroup and the restart with their causes.
  const nlohmann::json record = job_record(dir);
  REQUIRE(record.is_object());
  REQUIRE(record["rounds"].size() == 3);
  CHECK(record["rounds"][0]["ended_by"] == "regroup");
  CHECK(record["rounds"][1]["started_by"] == "scale-up");
  CHECK(record["rounds"][1]["nodes"].size() == 3);
  CHECK(record["rounds"][1]["ended_by"] == "failure");
  CHECK(record["rounds"][2]["started_by"] == "restart");
  CHECK(record["rounds"][2]["ended_by"] == "finished");
  CHECK(record["nnodes"] == 2);
  CHECK(record["status"] == "succeeded");
}

TEST_CASE("dynamic: with fewer than MIN nodes the join timeout says how many came", "[multinode][dynamic][timeout]") {
  NetnsHosts hosts(1);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  Agent a(hosts, 0,
          {"--nnodes", "2:3", "--rdzv-endpoint", hosts.address(0) + ":29400", "--rdzv-id", "mn", "--log-dir",
           dir / "runs", "--join-timeout", "1", "--", "true"},
          dir / "a");
  CHECK(a.wait(15s) == 69);
  CHECK_THAT(a.err(),
             Catch::Contains("only 1 node arrived within launch.join_timeout (1 s), fewer than the minimum of 2"));
}

// ---- one command for many hosts ----

namespace {

std::vector<std::string> hosts_command(const NetnsHosts& hosts, const TempDir& dir, const std::string& remote_shell,
                                       const std::vector<std::string>& more) {
  std::vector<std::string> argv = {
      kMgtrain,         "launch",     "--hosts",        hosts.name(0) + ":2," + hosts.name(1) + ":2",
      "--remote-shell", remote_shell, "--master-addr",  hosts.address(0),
      "--run-id",       "mn",         "--log-dir",      dir / "runs",
      "--grace-period", "1",          "--join-timeout", "20"};
  argv.insert(argv.end(), more.begin(), more.end());
  return argv;
}

}  // namespace

TEST_CASE(
    "hosts (--hosts): one command starts an agent per host through `ip netns exec {host} sh -c` and streams their "
    "output",
    "[multinode][hosts]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  std::string worker = write_script(dir / "env.sh", kEnvScript);
  ChildProcess launcher =
      start_process(hosts_command(hosts, dir, "ip netns exec {host} sh -c", {"--", worker}), dir / "launcher");
  std::optional<int> code = wait_for_exit(launcher.pid, 30s);
  INFO("launcher stderr:\n" << read_text(launcher.err_path));
  REQUIRE(code == 0);
  std::string out = read_text(launcher.out_path);
  CHECK_THAT(out,
             Catch::Contains("[" + hosts.name(0) + "] [rank 1] RANK=1 ") &&
                 Catch::Contains("[" + hosts.name(1) + "] [rank 3] RANK=3 LOCAL_RANK=1 GROUP_RANK=1 WORLD_SIZE=4"));
  CHECK_THAT(read_text(launcher.err_path),
             Catch::Contains("started 2 node agents through `ip netns exec {host} sh -c`"));
  CHECK(fields_of(read_text(rank_log(dir, 1, 0, 2)))["MASTER_ADDR"] == hosts.address(0));
  // Each agent read the token this launch made from its stdin: the rendezvous is authenticated, unasked.
  CHECK_THAT(read_text(launcher.err_path), Catch::Contains("[" + hosts.name(1) +
                                                           "] mgtrain: the rendezvous is "
                                                           "authenticated with the token from stdin"));
  CHECK_THAT(read_text(launcher.err_path), !Catch::Contains("not authenticated"));
}

TEST_CASE("hosts (--hosts): a failure on one host ends the job everywhere with its code", "[multinode][hosts]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  std::string worker = write_script(dir / "w.sh", "if [ \"$RANK\" = 3 ]; then sleep 0.3; exit 5; fi; sleep 60");
  auto started = Clock::now();
  ChildProcess launcher =
      start_process(hosts_command(hosts, dir, "ip netns exec {host} sh -c", {"--", worker}), dir / "launcher");
  std::optional<int> code = wait_for_exit(launcher.pid, 30s);
  INFO("launcher stderr:\n" << read_text(launcher.err_path));
  CHECK(code == 5);
  CHECK(seconds_since(started) < 10);
  CHECK_THAT(read_text(launcher.err_path),
             Catch::Contains("[" + hosts.name(0) + "] ") && Catch::Contains("rank       3 (local rank 1) on node 1"));
  CHECK(wait_until([&] { return live_job_processes({}, dir.path()).empty(); }, 5s));
  const nlohmann::json record = job_record(dir);  // by node 0's agent, the rendezvous' host
  REQUIRE(record.is_object());
  CHECK(record["status"] == "failed");
  CHECK(record["exit_code"] == 5);
  REQUIRE(record["rounds"].size() == 1);
  CHECK(record["rounds"][0]["ended_by"] == "failure");
  CHECK_THAT(record["rounds"][0]["cause"].get<std::string>(), Catch::Contains("rank 3 (local rank 1) on node 1"));
}

TEST_CASE("hosts (--hosts): when the launcher dies, agents that outlive their remote shell stop by themselves",
          "[multinode][hosts]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  // `setsid -w` puts the agent in a session of its own, out of reach of the launcher's process
  // groups and death signal, as on a remote host behind ssh: only its closed stdin can tell it.
  std::string worker = write_script(dir / "w.sh", "touch \"$MGTRAIN_RUN_DIR/../up_$RANK\"; sleep 60");
  ChildProcess launcher = start_process(
      hosts_command(hosts, dir, "ip netns exec {host} setsid -w sh -c", {"--", worker}), dir / "launcher");
  REQUIRE(wait_until([&] { return file_exists(dir / "runs/mn/up_0") && file_exists(dir / "runs/mn/up_3"); }, 20s));
  kill(launcher.pid, SIGKILL);
  wait_for_exit(launcher.pid, 5s);
  CHECK(wait_until([&] { return live_job_processes({}, dir.path()).empty(); }, 10s));

  // Ctrl-C: forwarded, every agent stops its workers, the launcher exits 130.
  std::string again = dir / "runs2";
  auto argv = hosts_command(hosts, dir, "ip netns exec {host} sh -c", {"--", worker});
  *(std::find(argv.begin(), argv.end(), dir / "runs")) = again;
  ChildProcess interrupted = start_process(argv, dir / "interrupted");
  REQUIRE(wait_until([&] { return file_exists(again + "/mn/up_0") && file_exists(again + "/mn/up_3"); }, 20s));
  kill(interrupted.pid, SIGINT);
  CHECK(wait_for_exit(interrupted.pid, 15s) == 130);
  CHECK(wait_until([&] { return live_job_processes({}, dir.path()).empty(); }, 10s));
}

// ---- on one machine, without namespaces (runs everywhere, root or not) ----

namespace {

// A free TCP port on this machine.
// Node `rank` of a static two-node job (one worker each, run id "mn") meeting at 127.0.0.1:`port`, running `program`.
std::vector<std::string> loopback_node(int rank, const std::string& port, const TempDir& dir,
                                       const std::string& program) {
  return {kMgtrain,
          "launch",
          "--nnodes",
          "2",
          "--node-rank",
          std::to_string(rank),
          "--master-addr",
          "127.0.0.1",
          "--master-port",
          port,
          "--nproc",
          "1",
          "--run-id",
          "mn",
          "--log-dir",
          dir / "runs",
          "--join-timeout",
          "20",
          "--",
          program};
}

}  // namespace

TEST_CASE("loopback: two node agents on one machine meet and run a static job", "[multinode][loopback]") {
  TempDir dir;
  std::string worker = write_script(dir / "env.sh", kEnvScript);
  const std::string port = std::to_string(free_port());
  ChildProcess node1 = start_process(loopback_node(1, port, dir, worker), dir / "node1");
  ChildProcess node0 = start_process(loopback_node(0, port, dir, worker), dir / "node0");
  CHECK(wait_for_exit(node0.pid, 20s) == 0);
  CHECK(wait_for_exit(node1.pid, 20s) == 0);
  auto fields = fields_of(read_text(rank_log(dir, 1, 0, 1)));
  CHECK(fields["RANK"] == "1");
  CHECK(fields["WORLD_SIZE"] == "2");
  CHECK(fields["MASTER_PORT"] != port);
  // One worker per node, but both nodes on this machine: they divide its CPUs, and each agent says so once.
  CHECK(fields["OMP"] == threads_for(2));
  CHECK(fields_of(read_text(rank_log(dir, 0, 0, 0)))["OMP"] == threads_for(2));
  for (const std::string& console : {read_text(node0.err_path), read_text(node1.err_path)}) {
    INFO(console);
    CHECK_THAT(console,
               Catch::Contains("setting OMP_NUM_THREADS=" + threads_for(2) + " for the worker: ") &&
                   Catch::Contains("shared by 2 workers (1 on this node, the others on nodes on the same CPUs)"));
  }
}

TEST_CASE("loopback: a rendezvous port answered by another program is a clear error, not a hang",
          "[multinode][loopback]") {
  TempDir dir;
  int port = 0;
  int listener = listening_socket(port);
  std::thread impostor([listener] {
    int connection = accept(listener, nullptr, nullptr);
    const char reply[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    if (connection >= 0) {
      ssize_t ignored = write(connection, reply, sizeof reply - 1);
      (void)ignored;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      close(connection);
    }
  });
  ChildProcess node1 = start_process(
      {kMgtrain, "launch", "--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port",
       std::to_string(port), "--log-dir", dir / "runs", "--join-timeout", "10", "--", "true"},
      dir / "node1");
  CHECK(wait_for_exit(node1.pid, 15s) == 2);
  impostor.join();
  close(listener);
  CHECK_THAT(read_text(node1.err_path), Catch::Contains("127.0.0.1:" + std::to_string(port) +
                                                        " is not an mgtrain rendezvous server of this version") &&
                                            Catch::Contains("'HTTP/1.1"));
}

TEST_CASE("loopback: a node that cannot start its workers reports its own error, and every node exits with its code",
          "[multinode][loopback][errors]") {
  TempDir dir;
  std::string worker = write_script(dir / "sleep.sh", "sleep 60");
  const std::string port = std::to_string(free_port());
  auto started = Clock::now();
  // Each node runs its own program: node 1's does not exist (the config, and so the agreement check, is the same).
  ChildProcess node0 = start_process(loopback_node(0, port, dir, worker), dir / "node0");
  ChildProcess node1 = start_process(loopback_node(1, port, dir, dir / "missing-program"), dir / "node1");
  CHECK(wait_for_exit(node1.pid, 30s) == 2);
  CHECK(wait_for_exit(node0.pid, 30s) == 2);
  CHECK(seconds_since(started) < 25);  // node 0's worker (sleep 60) was stopped, not waited for
  const std::string expected =
      "could not start its workers: cannot run worker command '" + (dir / "missing-program") + "'";
  CHECK_THAT(read_text(node1.err_path), Catch::Contains("mgtrain: error: node 1 (") && Catch::Contains(expected));
  const std::string node0_err = read_text(node0.err_path);
  CHECK_THAT(node0_err, Catch::Contains(expected) && Catch::Contains("exit code 2"));
  CHECK_THAT(node0_err, !Catch::Contains("closed the connection"));
}
