// Elastic scale-up with real node agents in network namespaces: a node that arrives while a dynamic
// round runs below MAX restarts the round with it (WORLD_SIZE grows, no restart of --max-restarts is
// used, not reported as a failure); at MAX a newcomer waits as a standby. Skips where namespaces
// cannot be made (netns_hosts.hpp).
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "launch_fixture.hpp"
#include "netns_agent.hpp"
#include "netns_hosts.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

// Each worker writes its variables to env_w<WORLD_SIZE>_r<RANK> next to the agents' directories, then
// runs until the test creates `release`. On SIGTERM it behaves like mgtrain's trainer: it notes the stop
// and exits 75 (saved a checkpoint and stopped).
std::string elastic_worker(const TempDir& dir) {
  const std::string runs = dir / "runs/el";
  return write_script(
      dir / "worker.sh",
      "out='" + runs +
          "'/env_w${WORLD_SIZE}_r$RANK\n"
          "echo \"RANK=$RANK GROUP_RANK=$GROUP_RANK WORLD_SIZE=$WORLD_SIZE GROUP_WORLD_SIZE=$GROUP_WORLD_SIZE "
          "RESTART=$TORCHELASTIC_RESTART_COUNT MAX_RESTARTS=$TORCHELASTIC_MAX_RESTARTS\" > \"$out.tmp\"\n"
          "mv \"$out.tmp\" \"$out\"\n"
          "trap 'echo \"WORLD_SIZE=$WORLD_SIZE\" >> \"" +
          runs +
          "/stopped_r$RANK\"; exit 75' TERM\n"
          "while [ ! -e '" +
          (dir / "release") + "' ]; do sleep 0.1; done\n");
}

std::vector<std::string> elastic_flags(const NetnsHosts& hosts, const TempDir& dir, const std::string& nnodes,
                                       const std::string& worker) {
  return {"--nnodes",
          nnodes,
          "--rdzv-endpoint",
          hosts.address(0) + ":29400",
          "--rdzv-id",
          "el",
          "--nproc",
          "1",
          "--log-dir",
          dir / "runs",
          "--grace-period",
          "3",
          "--join-timeout",
          "20",
          "--last-call-timeout",
          "1",
          "--node-timeout",
          "5",
          "--max-restarts",
          "0",
          "--",
          worker};
}

void release(const TempDir& dir) { std::ofstream(dir / "release") << "go\n"; }

}  // namespace

TEST_CASE("elastic: a node that arrives while a 1:2 round runs is admitted, both run with WORLD_SIZE=2 and exit 0",
          "[multinode][dynamic][elastic]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  const std::vector<std::string> flags = elastic_flags(hosts, dir, "1:2", elastic_worker(dir));
  Agent a(hosts, 0, flags, dir / "a");
  // Round 0: A alone (MIN 1) after the last call.
  REQUIRE(wait_until([&] { return file_exists(dir / "runs/el/env_w1_r0"); }, 20s));
  CHECK(fields_of(read_text(dir / "runs/el/env_w1_r0"))["RESTART"] == "0");
  Agent b(hosts, 1, flags, dir / "b");
  // B's arrival restarts the round: A's worker is stopped (SIGTERM), then both run round 1 together.
  REQUIRE(wait_until([&] { return file_exists(dir / "runs/el/env_w2_r0") && file_exists(dir / "runs/el/env_w2_r1"); },
                     20s));
  INFO("a stderr:\n" << a.err() << "\nb stderr:\n" << b.err());
  CHECK(read_text(dir / "runs/el/stopped_r0") == "WORLD_SIZE=1\n");
  auto rank0 = fields_of(read_text(dir / "runs/el/env_w2_r0"));
  auto rank1 = fields_of(read_text(dir / "runs/el/env_w2_r1"));
  CHECK(rank0["GROUP_RANK"] == "0");  // the endpoint's host stays node 0
  CHECK(rank1["GROUP_RANK"] == "1");
  CHECK(rank1["GROUP_WORLD_SIZE"] == "2");
  // torchrun: "membership changes do not count as retries": --max-restarts 0, and the count stays 0
  CHECK(rank0["RESTART"] == "0");
  CHECK(rank1["RESTART"] == "0");
  CHECK(rank1["MAX_RESTARTS"] == "0");
  release(dir);
  CHECK(a.wait(20s) == 0);
  CHECK(b.wait(20s) == 0);
  CHECK_FALSE(file_exists(dir / "runs/el/stopped_r1"));  // round 1 ended by itself
  const std::string a_err = a.err();
  CHECK_THAT(a_err, Catch::Contains("stopping the workers of node 0 (") &&
                        Catch::Contains(", " + hosts.address(1) +
                                        ") arrived; restarting the round with 2 nodes (elastic scale-up, "
                                        "not counted against --max-restarts); waiting up to "));
  CHECK_THAT(a_err, Catch::Contains("round 1: node 0 (") && Catch::Contains("of 2 (rank 0 of 2)"));
  CHECK_THAT(b.err(), Catch::Contains("round 0 runs with 1 node of at most 2; it restarts to admit this node") &&
                          Catch::Contains("round 1: node 1 (") && Catch::Contains("(rank 1 of 2)"));
  // not a failure: no report, no failure.json, no restart used
  for (const std::string& err : {a_err, b.err()}) {
    CHECK_THAT(
        err, !Catch::Contains("Root cause") && !Catch::Contains("restart 1 of") && !Catch::Contains("mgtrain: error"));
  }
  CHECK(read_text(dir / "runs/el/env_w1_r0").find("WORLD_SIZE=1") != std::string::npos);
}

TEST_CASE(
    "elastic: at MAX a newcomer waits as a standby, the round is not restarted and the job ends with 0 everywhere",
    "[multinode][dynamic][elastic]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  const std::vector<std::string> flags = elastic_flags(hosts, dir, "1:1", elastic_worker(dir));
  Agent a(hosts, 0, flags, dir / "a");
  REQUIRE(wait_until([&] { return file_exists(dir / "runs/el/env_w1_r0"); }, 20s));
  Agent b(hosts, 1, flags, dir / "b");
  REQUIRE(wait_until([&] { return b.err().find("waits as a standby") != std::string::npos; }, 20s));
  INFO("a stderr:\n" << a.err() << "\nb stderr:\n" << b.err());
  CHECK_FALSE(file_exists(dir / "runs/el/stopped_r0"));  // A's worker was never stopped
  release(dir);
  CHECK(a.wait(20s) == 0);
  CHECK(b.wait(20s) == 0);
  CHECK_FALSE(file_exists(dir / "runs/el/stopped_r0"));
  CHECK_FALSE(file_exists(dir / "runs/el/env_w2_r1"));
  CHECK_THAT(a.err(), !Catch::Contains("restarting the round"));
  CHECK_THAT(b.err(),
             Catch::Contains("round 0 runs with the maximum of 1 node; this node waits as a standby") &&
                 Catch::Contains("the job ended (exit code 0) while this node waited as a standby; it ran no worker"));
}
