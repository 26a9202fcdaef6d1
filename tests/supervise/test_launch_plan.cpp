// Resolving and checking the launch settings: nproc, GPUs, nodes, ports, paths.
#include <catch2/catch.hpp>

#include "host/gpu_inventory.hpp"
#include "supervise/launch_plan.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

using namespace mgtrain;

namespace {
HostFacts host_with_gpus(int count) {
  HostFacts host;
  host.visible_gpus = visible_gpus(count, std::nullopt);
  host.cpus.affinity.resize(6);  // CPUs 0 .. 6-1
  std::iota(host.cpus.affinity.begin(), host.cpus.affinity.end(), 0);
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
// A typed launch setting from text that is known to be good (its parser: tests/config/test_launch_settings.cpp).
template <class T>
T parsed(const std::string& text) {
  return T::parse(text).value();
}
}  // namespace

TEST_CASE("nproc: a number, cpu, gpu and auto", "[plan]") {
  LaunchConfig launch = defaults();
  launch.nproc = parsed<NprocSpec>("3");
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).nproc == 3);
  launch.nproc = parsed<NprocSpec>("cpu");
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).nproc == 6);
  launch.nproc = parsed<NprocSpec>("gpu");
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(4)).nproc == 4);
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)),
                    Catch::Contains("no NVIDIA GPU") && Catch::Contains("use --nproc N or --nproc cpu"));
  // The torchrun personality's message names torchrun's flag.
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0), Strategy::Ddp, Personality::Torchrun),
                    Catch::Contains("use --nproc-per-node N or --nproc-per-node cpu"));
  launch.nproc = parsed<NprocSpec>("auto");
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(2)).nproc == 2);
  LaunchPlan cpu_only = make_launch_plan(launch, kCommand, host_with_gpus(0));
  CHECK(cpu_only.nproc == 1);
  CHECK_THAT(cpu_only.nproc_reason, Catch::Contains("no GPU"));
}

TEST_CASE("gpu_ids give each local rank one GPU, counted against nproc", "[plan]") {
  LaunchConfig launch = defaults();
  launch.gpu_ids = parsed<GpuList>("0,2");
  launch.nproc = parsed<NprocSpec>("gpu");
  LaunchPlan plan = make_launch_plan(launch, kCommand, host_with_gpus(4));
  CHECK(plan.nproc == 2);
  CHECK(plan.gpu_for_local_rank == std::vector<std::string>{"0", "2"});
  launch.nproc = parsed<NprocSpec>("3");
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(4)), Catch::Contains("names 2 GPUs"));
  launch.nproc = parsed<NprocSpec>("2");
  launch.gpu_ids = parsed<GpuList>("0,7");
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(4)), Catch::Contains("GPU 7 does not exist"));
  launch.gpu_ids = parsed<GpuList>("1,1");
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(4)), Catch::Contains("listed twice"));
}

TEST_CASE("gpu_ids index the GPUs left visible by CUDA_VISIBLE_DEVICES", "[plan]") {
  HostFacts host = host_with_gpus(8);
  host.visible_gpus = visible_gpus(8, std::string("4,5,6,7"));
  host.cuda_visible_devices_set = true;
  LaunchConfig launch = defaults();
  launch.nproc = parsed<NprocSpec>("auto");
  launch.gpu_ids = parsed<GpuList>("1,3");
  CHECK(make_launch_plan(launch, kCommand, host).gpu_for_local_rank == std::vector<std::string>{"5", "7"});
  launch.gpu_ids = parsed<GpuList>("");
  CHECK(make_launch_plan(launch, kCommand, host).nproc == 4);
  CHECK(make_launch_plan(launch, kCommand, host).gpu_for_local_rank.empty());  // untouched: torchrun's behaviour
}

TEST_CASE("virtual_local_rank: each worker one GPU as torch's agent gives it, or its gpu_ids entry", "[plan]") {
  LaunchConfig launch = defaults();
  launch.virtual_local_rank = true;
  launch.nproc = parsed<NprocSpec>("3");
  LaunchPlan plain = make_launch_plan(launch, kCommand, host_with_gpus(0));  // no variable: GPU i, GPUs or not
  CHECK(plain.virtual_local_rank);
  CHECK(plain.gpu_for_local_rank == std::vector<std::string>{"0", "1", "2"});
  HostFacts host = host_with_gpus(8);
  host.cuda_visible_devices = "4, 6,GPU-x,7";
  host.visible_gpus = visible_gpus(8, host.cuda_visible_devices);
  host.cuda_visible_devices_set = true;
  CHECK(make_launch_plan(launch, kCommand, host).gpu_for_local_rank == std::vector<std::string>{"4", "6", "GPU-x"});
  launch.gpu_ids = parsed<GpuList>("2,0,1");  // index the visible GPUs, as without virtual_local_rank
  CHECK(make_launch_plan(launch, kCommand, host).gpu_for_local_rank == std::vector<std::string>{"GPU-x", "4", "6"});
  launch.gpu_ids = parsed<GpuList>("");
  host.cuda_visible_devices = "4,6";
  CHECK_THROWS_WITH(
      make_launch_plan(launch, kCommand, host),
      Catch::StartsWith("launch.virtual_local_rank gives each worker one entry of CUDA_VISIBLE_DEVICES=4,6, "
                        "which has 2 for 3 workers"));
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
  launch.nproc = parsed<NprocSpec>("2");
  launch.nnodes = parsed<NodeRange>("3");
  launch.node_rank = 2;
  launch.master_port = 29500;
  LaunchPlan plan = make_launch_plan(launch, kCommand, host_with_gpus(0));
  CHECK(plan.world_size == 6);
  CHECK(plan.global_rank(1) == 5);
  launch.nnodes = parsed<NodeRange>("3:3");
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).nnodes == 3);
  launch.nnodes = parsed<NodeRange>("1:3");
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)),
                    Catch::Contains("elastic jobs need the dynamic rendezvous, --rdzv-endpoint HOST:PORT"));
  // Dynamic: ranks come from the rendezvous, the port defaults to torchrun's.
  launch.rdzv_endpoint = parsed<RdzvEndpoint>("node0");
  LaunchPlan elastic = make_launch_plan(launch, kCommand, host_with_gpus(0));
  CHECK(elastic.dynamic);
  CHECK(elastic.multi_node());
  CHECK(elastic.min_nodes == 1);
  CHECK(elastic.max_nodes == 3);
  CHECK(elastic.rdzv_host == "node0");
  CHECK(elastic.rdzv_port == 29400);
  CHECK(elastic.master_addr == "node0");
  launch.rdzv_endpoint = parsed<RdzvEndpoint>("[::1]:1234");
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).rdzv_host == "::1");
  launch.rdzv_backend = RdzvBackend::Static;  // torchrun's static backend: the endpoint is node 0's address and port
  launch.nnodes = parsed<NodeRange>("3");
  launch.rdzv_endpoint = parsed<RdzvEndpoint>("node0:29511");
  LaunchPlan fixed = make_launch_plan(launch, kCommand, host_with_gpus(0));
  CHECK_FALSE(fixed.dynamic);
  CHECK(fixed.master_addr == "node0");
  CHECK(fixed.master_port == 29511);
  CHECK(fixed.node_rank == 2);
  launch.rdzv_endpoint = parsed<RdzvEndpoint>("");
  launch.rdzv_backend = RdzvBackend::C10d;
  launch.nnodes = parsed<NodeRange>("1");
  launch.node_rank = 0;
  CHECK_FALSE(make_launch_plan(launch, kCommand, host_with_gpus(0)).multi_node());  // one node: no agent protocol
  launch.node_timeout = 6;
  launch.node_heartbeat_interval = 5;
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).node_heartbeat_interval_s ==
        2);  // a third of the timeout
  launch.node_rank = 2;
  launch.nnodes = parsed<NodeRange>("2");
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)),
                    Catch::Contains("node_rank 2 is outside 0..1"));
  launch.node_rank = 0;
  launch.master_port = 0;
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)), Catch::Contains("same --master-port"));
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
  launch.max_restarts = 2;
  launch.grace_period = 1.5;
  LaunchPlan numbers = make_launch_plan(launch, kCommand, host_with_gpus(0));
  CHECK(numbers.max_restarts == 2);
  CHECK(numbers.grace_period_s == 1.5);
  CHECK_THROWS_AS(make_launch_plan(launch, {}, host_with_gpus(0)), UsageError);
}

TEST_CASE("rdzv_endpoint HOST:0 with one node: a single-node job on a free port (torchrun's recipe)", "[plan]") {
  LaunchConfig launch = defaults();
  launch.nproc = parsed<NprocSpec>("2");
  launch.rdzv_endpoint = parsed<RdzvEndpoint>("localhost:0");
  launch.nnodes = parsed<NodeRange>("1:1");  // torchrun's default spelling
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
  launch.rdzv_endpoint = parsed<RdzvEndpoint>("[::1]:0");
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).master_addr == "::1");
  launch.nnodes = parsed<NodeRange>("1:2");
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)),
                    Catch::Contains("'[::1]:0' asks for a free port (:0), which only a single node can use"));
  launch.nnodes = parsed<NodeRange>("2");
  launch.rdzv_endpoint = parsed<RdzvEndpoint>("node0:0");
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)), Catch::Contains("use --nnodes 1"));
}

TEST_CASE("launch.role becomes the plan's role (ROLE_NAME)", "[plan]") {
  LaunchConfig launch = defaults();
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).role == "default");
  launch.role = "trainer";
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).role == "trainer");
}

TEST_CASE("the plan starts from the config's defaults (launch_defaults.hpp), not numbers of its own", "[plan]") {
  const LaunchConfig launch = defaults();
  const LaunchPlan plan = make_launch_plan(launch, kCommand, host_with_gpus(0));
  CHECK(plan.grace_period_s == launch.grace_period);
  const LaunchPlan plan_defaults;
  CHECK(plan_defaults.grace_period_s == launch.grace_period);
  CHECK(plan_defaults.join_timeout_s == launch.join_timeout);
  CHECK(plan_defaults.last_call_timeout_s == launch.last_call_timeout);
  CHECK(plan_defaults.node_timeout_s == launch.node_timeout);
  CHECK(plan_defaults.role == launch.role);
}

TEST_CASE("gpu_ids UUIDs are used as they are, indices become the visible GPU, each GPU once", "[plan][gpu]") {
  LaunchConfig launch = defaults();
  launch.nproc = parsed<NprocSpec>("gpu");
  launch.gpu_ids = parsed<GpuList>("GPU-aa,MIG-bb");
  LaunchPlan plan = make_launch_plan(launch, kCommand, host_with_gpus(0));  // no GPU found here: UUIDs need none
  CHECK(plan.nproc == 2);
  CHECK(plan.gpu_for_local_rank == std::vector<std::string>{"GPU-aa", "MIG-bb"});
  HostFacts host = host_with_gpus(2);
  host.visible_gpus = {"GPU-aa", "GPU-cc"};  // CUDA_VISIBLE_DEVICES=GPU-aa,GPU-cc
  host.cuda_visible_devices_set = true;
  launch.gpu_ids = parsed<GpuList>("1,GPU-aa");
  CHECK(make_launch_plan(launch, kCommand, host).gpu_for_local_rank == std::vector<std::string>{"GPU-cc", "GPU-aa"});
  launch.gpu_ids = parsed<GpuList>("0,GPU-aa");  // the same GPU twice, once by index
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host), Catch::Contains("GPU GPU-aa is listed twice"));
}

TEST_CASE("tee, redirect, local_ranks_filter and tty resolve per local rank, ranks beyond nproc name the key",
          "[plan][routing]") {
  LaunchConfig launch = defaults();
  launch.nproc = parsed<NprocSpec>("3");
  launch.redirect = parsed<StdSpec>("3");
  launch.tee = parsed<StdSpec>("1:1,9:3");  // rank 9 does not run here: ignored, as torchrun does
  launch.local_ranks_filter = parsed<LocalRanks>("1,2");
  LaunchPlan plan = make_launch_plan(launch, kCommand, host_with_gpus(0));
  REQUIRE(plan.console.size() == 3);
  CHECK_FALSE(plan.console[0].stdout_to_console);                                     // filtered out
  CHECK((plan.console[1].stdout_to_console && !plan.console[1].stderr_to_console));   // redirected, stdout teed back
  CHECK((!plan.console[2].stdout_to_console && !plan.console[2].stderr_to_console));  // redirected
  CHECK(plan.tty.mode == TtyMode::Auto);

  launch.tty = parsed<TtySpec>("2");
  CHECK((make_launch_plan(launch, kCommand, host_with_gpus(0)).tty.mode == TtyMode::On &&
         make_launch_plan(launch, kCommand, host_with_gpus(0)).tty.local_rank == 2));
  launch.tty = parsed<TtySpec>("on");
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).tty.local_rank == 0);
  launch.tty = parsed<TtySpec>("off");
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).tty.mode == TtyMode::Off);
  launch.tty = parsed<TtySpec>("3");
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)),
                    Catch::Contains("launch.tty: local rank 3 does not exist") && Catch::Contains("local ranks 0..2"));
  launch.tty = TtySpec{};
  launch.local_ranks_filter = parsed<LocalRanks>("0,3");
  CHECK_THROWS_WITH(make_launch_plan(launch, kCommand, host_with_gpus(0)),
                    Catch::Contains("launch.local_ranks_filter: local rank 3 does not exist"));
}

TEST_CASE("console_dedup: auto is on from 4 ranks on the console in mgtrain's personality", "[plan]") {
  const auto routed = [](int shown, int hidden) {
    std::vector<ConsoleRouting> console(static_cast<std::size_t>(shown + hidden));
    for (int i = shown; i < shown + hidden; ++i) console[static_cast<std::size_t>(i)] = ConsoleRouting{false, false};
    return console;
  };
  CHECK(console_dedup_on(ConsoleDedupMode::Auto, Personality::Mgtrain, routed(4, 0)));
  CHECK_FALSE(console_dedup_on(ConsoleDedupMode::Auto, Personality::Mgtrain, routed(3, 0)));
  CHECK_FALSE(console_dedup_on(ConsoleDedupMode::Auto, Personality::Mgtrain, routed(3, 5)));  // hidden ranks
  CHECK_FALSE(console_dedup_on(ConsoleDedupMode::Auto, Personality::Torchrun, routed(8, 0)));
  CHECK(console_dedup_on(ConsoleDedupMode::On, Personality::Torchrun, routed(2, 0)));
  CHECK_FALSE(console_dedup_on(ConsoleDedupMode::Off, Personality::Mgtrain, routed(8, 0)));
  LaunchConfig launch = defaults();
  launch.nproc = parsed<NprocSpec>("4");
  CHECK(make_launch_plan(launch, kCommand, host_with_gpus(0)).console_dedup);
}
