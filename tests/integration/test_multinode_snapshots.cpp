// Snapshots in memory across nodes (docs/checkpoints.md#snapshots-in-memory), with real processes in network
// namespaces (netns_hosts.hpp): an elastic job of 2 nodes (--nnodes 2:2) running the built-in trainer, a third node
// waiting as a standby. Node B's agent is SIGKILLed (its workers die with it); the standby takes its place, and the new
// round resumes from the snapshot node A's rank holds, sent to the standby's rank, which has none: not from the
// newest file, and not from scratch.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "launch_fixture.hpp"
#include "multinode_job.hpp"
#include "netns_agent.hpp"
#include "netns_hosts.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;

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
  const std::vector<std::string> flags = {"--nnodes",
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
                                          "ddp.connect_timeout_s=30"};
  const std::vector<std::string> env = {"OMP_NUM_THREADS=1", "MGTRAIN_SHM_ALLREDUCE=0"};
  Agent a(hosts, 0, flags, dir / "a", env);
  Agent b(hosts, 1, flags, dir / "b", env);
  REQUIRE(wait_until([&] { return a.err().find("round 0: node 0 (") != std::string::npos; }, 60s));
  Agent c(hosts, 2, flags, dir / "c", env);
  const auto last_step = [](const std::string& text) {
    const std::size_t at = text.rfind("mgtrain: step ");
    return at == std::string::npos ? -1 : std::atoi(text.c_str() + at + 14);
  };
  const bool ready = wait_until(
      [&] { return c.err().find("waits as a standby") != std::string::npos && last_step(a.out()) >= 300; }, 90s);
  INFO("a stderr:\n" << a.err() << "\nb stderr:\n" << b.err() << "\nc stderr:\n" << c.err());
  REQUIRE(ready);
  const int reached = last_step(a.out());  // rank 0's lines reach node A's console
  REQUIRE(kill(b.pid(), SIGKILL) == 0);
  CHECK(a.wait(120s) == 0);
  CHECK(c.wait(120s) == 0);
  b.wait(1s);
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
