// Resolving and checking the launch settings: nproc, GPUs, nodes, ports, paths.
#include <catch2/catch.hpp>

#include "util/error.hpp"
#include "host/gpu_inventory.hpp"
#include "supervise/launch_plan.hpp"
#include "support/temp_dir.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace mgtrain;

namespace {
HostFacts host_with_gpus(int count) {
  HostFacts host;
  host.visible_gpus = visible_gpus(count, std::nullopt);
  host.cpu_count = 6;
  host.hostname = "box";
  host.cwd = "/home/alice/project";
  return host;
}
LaunchConfig defaults() {
  LaunchConfig launch;
  launch.run_id = "r1";
  return launch;
}
const std::vector<std::string> kCommand = {"prog"};
}  // namespace

TEST_CASE("nproc: a number, cpu, gpu and auto", "[plan]") {
  LaunchConfig launch = defaults();
  launch.nproc = "3";
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).nproc == 3);
  launch.nproc = "cpu";
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).nproc == 6);
  launch.nproc = "gpu";
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(4)).nproc == 4);
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)), Catch::Contains("no NVIDIA GPU"));
  launch.nproc = "auto";
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(2)).nproc == 2);
  LaunchPlan cpu_only = make_launch_plan(launch, kCommand, host_with_gpus(0));
  CHECK(cpu_only.nproc == 1);
  CHECK_THAT(cpu_only.nproc_reason, Catch::Contains("no GPU"));
  for (const char* bad : {"0", "-1", "two", ""}) {
    launch.nproc = bad;
    CHECK_THROWS_AS(make_launch_plan(launch, kCommand, host_with_gpus(0)), UsageError);
  }
}

TEST_CASE("gpu_ids give each local rank one GPU, counted against nproc", "[plan]") {
  LaunchConfig launch = defaults();
  launch.gpu_ids = "0,2";
  launch.nproc = "gpu";
  LaunchPlan plan = make_launch_plan(launch, kCommand, host_with_gpus(4));
  CHECK(plan.nproc == 2);
  CHECK(plan.gpu_for_local_rank == std::vector<std::string>{"0", "2"});
  launch.nproc = "3";
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(4)), Catch::Contains("names 2 GPUs"));
  launch.nproc = "2";
  launch.gpu_ids = "0,7";
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(4)), Catch::Contains("GPU 7 does not exist"));
  launch.gpu_ids = "1,1";
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(4)), Catch::Contains("listed twice"));
}

TEST_CASE("gpu_ids index the GPUs left visible by CUDA_VISIBLE_DEVICES", "[plan]") {
  HostFacts host = host_with_gpus(8);
  host.visible_gpus = visible_gpus(8, std::string("4,5,6,7"));
  host.cuda_visible_devices_set = true;
  LaunchConfig launch = defaults();
  launch.nproc = "auto";
  launch.gpu_ids = "1,3";
  CHECK(make_launch_plan(launch, kCommand, host).gpu_for_local_rank == std::vector<std::string>{"5", "7"});
  launch.gpu_ids = "";
  CHECK(make_launch_plan(launch, kCommand, host).nproc == 4);
  CHECK(make_launch_plan(launch, kCommand, host).gpu_for_local_rank.empty());  // untouched: torchrun's behaviour
}

TEST_CASE("CUDA_VISIBLE_DEVICES is read the way CUDA reads it", "[gpu]") {
  CHECK(visible_gpus(2, std::nullopt) == std::vector<std::string>{"0", "1"});
  CHECK(visible_gpus(4, std::string("2, 0")) == std::vector<std::string>{"2", "0"});
  CHECK(visible_gpus(4, std::string("")).empty());
  CHECK(visible_gpus(4, std::string("-1")).empty());
  CHECK(visible_gpus(4, std::string("1,9,2")) == std::vector<std::string>{"1"});  // stops at the first bad entry
  CHECK(visible_gpus(2, std::string("GPU-aa,MIG-bb")) == std::vector<std::string>{"GPU-aa", "MIG-bb"});
}

TEST_CASE("GPUs are counted from the driver's files", "[gpu]") {
  namespace fs = std::filesystem;
  const mgtrain::testing::TempDir temp_dir("mgtrain-gpu-files");
  const fs::path root = fs::path(temp_dir.path()) / "root";
  fs::create_directories(root / "dev");
  CHECK(count_nvidia_gpus(root.string()) == 0);
  for (const char* node : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "null"}) std::ofstream(root / "dev" / node);
  CHECK(count_nvidia_gpus(root.string()) == 2);
  fs::create_directories(root / "proc/driver/nvidia/gpus/0000:3b:00.0");
  fs::create_directories(root / "proc/driver/nvidia/gpus/0000:5e:00.0");
  fs::create_directories(root / "proc/driver/nvidia/gpus/0000:86:00.0");
  CHECK(count_nvidia_gpus(root.string()) == 3);
  fs::remove_all(root);
  CHECK(count_nvidia_gpus(root.string()) == 0);
}

TEST_CASE("nodes, ranks and ports", "[plan]") {
  LaunchConfig launch = defaults();
  launch.nproc = "2";
  launch.nnodes = "3";
  launch.node_rank = 2;
  launch.master_port = 29500;
  LaunchPlan plan = make_launch_plan(launch, kCommand, host_with_gpus(0));
  CHECK(plan.world_size == 6);
  CHECK(plan.global_rank(1) == 5);
  launch.nnodes = "3:3";
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).nnodes == 3);
  launch.nnodes = "1:3";
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)),
                    Catch::Contains("elastic jobs need the dynamic rendezvous, --rdzv-endpoint HOST:PORT"));
  launch.rdzv_endpoint = "node0";  // dynamic: ranks come from the rendezvous, the port defaults to torchrun's
  LaunchPlan elastic = make_launch_plan(launch, kCommand, host_with_gpus(0));
  CHECK(elastic.dynamic);
  CHECK(elastic.multi_node());
  CHECK(elastic.min_nodes == 1);
  CHECK(elastic.max_nodes == 3);
  CHECK(elastic.rdzv_host == "node0");
  CHECK(elastic.rdzv_port == 29400);
  CHECK(elastic.master_addr == "node0");
  launch.rdzv_endpoint = "[::1]:1234";
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).rdzv_host == "::1");
  launch.rdzv_backend = RdzvBackend::Static;  // torchrun's static backend: the endpoint is node 0's address and port
  launch.nnodes = "3";
  launch.rdzv_endpoint = "node0:29511";
  LaunchPlan fixed = make_launch_plan(launch, kCommand, host_with_gpus(0));
  CHECK_FALSE(fixed.dynamic);
  CHECK(fixed.master_addr == "node0");
  CHECK(fixed.master_port == 29511);
  CHECK(fixed.node_rank == 2);
  launch.rdzv_endpoint = "";
  launch.rdzv_backend = RdzvBackend::C10d;
  launch.nnodes = "1";
  launch.node_rank = 0;
  CHECK_FALSE(make_launch_plan(launch, kCommand, host_with_gpus(0)).multi_node());  // one node: no agent protocol
  launch.node_timeout = 6;
  launch.node_heartbeat_interval = 5;
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).node_heartbeat_interval_s == 2);  // a third of the timeout
  launch.node_rank = 2;
  launch.nnodes = "2";
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)), Catch::Contains("node_rank 2 is outside 0..1"));
  launch.node_rank = 0;
  launch.master_port = 0;
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)), Catch::Contains("same --master-port"));
  launch.master_port = 70000;
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)), Catch::Contains("not a TCP port"));
  launch.master_port = 29500;
  launch.standalone = true;
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)), Catch::Contains("standalone"));
}

TEST_CASE("run directory, run id and the other numbers", "[plan]") {
  LaunchConfig launch = defaults();
  launch.log_dir = "runs/";
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).run_dir == "/home/alice/project/runs/r1");
  launch.log_dir = "/var/log/x";
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).run_dir == "/var/log/x/r1");
  launch.run_id = "a/b";
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)), Catch::Contains("launch.run_id"));
  launch.run_id = "r1";
  launch.max_restarts = -1;
  CHECK_THROWS_AS(make_launch_plan(launch, kCommand, host_with_gpus(0)), UsageError);
  launch.max_restarts = 0;
  launch.grace_period = -1;
  CHECK_THROWS_AS(make_launch_plan(launch, kCommand, host_with_gpus(0)), UsageError);
  launch.grace_period = 1;
  launch.tee = "7";
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)), Catch::Contains("launch.tee"));
  launch.tee = "0";
  CHECK_THROWS_AS(make_launch_plan(launch, {}, host_with_gpus(0)), UsageError);
}

TEST_CASE("rdzv_endpoint HOST:0 with one node: a single-node job on a free port (torchrun's recipe)", "[plan]") {
  LaunchConfig launch = defaults();
  launch.nproc = "2";
  launch.rdzv_endpoint = "localhost:0";
  launch.nnodes = "1:1";  // torchrun's default spelling
  for (RdzvBackend backend : {RdzvBackend::C10d, RdzvBackend::Static}) {
    launch.rdzv_backend = backend;
    LaunchPlan plan = make_launch_plan(launch, kCommand, host_with_gpus(0));
    CHECK_FALSE(plan.dynamic);
    CHECK_FALSE(plan.multi_node());
    CHECK(plan.picks_port());
    CHECK(plan.master_addr == "localhost");
    CHECK(plan.world_size == 2);
  }
  launch.rdzv_backend = RdzvBackend::C10d;
  launch.rdzv_endpoint = "[::1]:0";
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).master_addr == "::1");
  launch.nnodes = "1:2";
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)),
                    Catch::Contains("'[::1]:0' asks for a free port (:0), which only a single node can use"));
  launch.nnodes = "2";
  launch.rdzv_endpoint = "node0:0";
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)), Catch::Contains("use --nnodes 1"));
}

TEST_CASE("launch.role becomes the plan's role (ROLE_NAME)", "[plan]") {
  LaunchConfig launch = defaults();
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).role == "default");
  launch.role = "trainer";
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).role == "trainer");
  launch.role = "";
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)), Catch::Contains("launch.role is empty"));
}
