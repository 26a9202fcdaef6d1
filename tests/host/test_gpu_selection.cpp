// `--gpu-ids auto` (the GPUs with the most free memory, from NVML statistics; without NVML the first ones) and
// ddp.strategy dp in the launch plan (one worker that sees every selected GPU).
#include <catch2/catch.hpp>

#include <numeric>

#include "host/gpu_inventory.hpp"
#include "host/gpu_selection.hpp"
#include "supervise/launch_plan.hpp"
#include "util/error.hpp"

using namespace mgtrain;

namespace {

constexpr std::int64_t kGiB = 1024LL * 1024 * 1024;

GpuSample gpu(int index, std::int64_t used_gib, std::int64_t total_gib = 80) {
  GpuSample sample;
  sample.index = index;
  sample.uuid = "GPU-" + std::to_string(index) + "aaa";
  sample.memory_used_bytes = used_gib * kGiB;
  sample.memory_total_bytes = total_gib * kGiB;
  return sample;
}

HostFacts host_with(int count, std::vector<GpuSample> samples) {
  HostFacts host;
  host.visible_gpus = visible_gpus(count, std::nullopt);
  host.cpus.affinity.resize(4);  // CPUs 0 .. 4-1
  std::iota(host.cpus.affinity.begin(), host.cpus.affinity.end(), 0);
  host.hostname = "box";
  host.cwd = "/home/alice/project";
  host.gpu_stats = [samples] { return samples; };
  return host;
}

LaunchConfig launch_with(const std::string& nproc, const std::string& gpu_ids) {
  LaunchConfig launch;
  launch.run_id = "r1";
  launch.nproc = NprocSpec::parse(nproc).value();
  launch.gpu_ids = GpuList::parse(gpu_ids).value();
  return launch;
}

const std::vector<std::string> kCommand = {"prog"};

}  // namespace

TEST_CASE("gpu selection: the N GPUs with the most free memory, in visible order, as UUIDs", "[gpu_selection]") {
  const std::vector<GpuSample> samples{gpu(0, 70), gpu(1, 2), gpu(2, 40), gpu(3, 1)};
  GpuSelection two = select_gpus_by_free_memory(2, {"0", "1", "2", "3"}, samples);
  CHECK(two.devices == std::vector<std::string>{"GPU-1aaa", "GPU-3aaa"});
  CHECK_THAT(two.note, Catch::Contains("most free memory") && Catch::Contains("1 (78.0 GiB free)") &&
                           Catch::Contains("3 (79.0 GiB free)"));
  GpuSelection three = select_gpus_by_free_memory(3, {"0", "1", "2", "3"}, samples);
  CHECK(three.devices == std::vector<std::string>{"GPU-1aaa", "GPU-2aaa", "GPU-3aaa"});
}

TEST_CASE("gpu selection: ties keep the visible order, unmeasured GPUs come last", "[gpu_selection]") {
  GpuSample unknown = gpu(0, 0);
  unknown.memory_used_bytes = -1;
  const std::vector<GpuSample> samples{unknown, gpu(1, 10), gpu(2, 10)};
  CHECK(select_gpus_by_free_memory(1, {"0", "1", "2"}, samples).devices == std::vector<std::string>{"GPU-1aaa"});
  CHECK(select_gpus_by_free_memory(3, {"0", "1", "2"}, samples).devices.front() ==
        "GPU-0aaa");  // still chosen when needed
}

TEST_CASE("gpu selection: CUDA_VISIBLE_DEVICES entries are matched by index or UUID", "[gpu_selection]") {
  const std::vector<GpuSample> samples{gpu(0, 1), gpu(1, 50), gpu(2, 60), gpu(3, 5)};
  // Only 2 and 3 are visible (as "2" and a UUID): GPU 0, the emptiest, is not a candidate.
  GpuSelection one = select_gpus_by_free_memory(1, {"2", "GPU-3aaa"}, samples);
  CHECK(one.devices == std::vector<std::string>{"GPU-3aaa"});
}

TEST_CASE("gpu selection: without NVML the first N visible GPUs, and the note says so", "[gpu_selection]") {
  GpuSelection first = select_gpus_by_free_memory(2, {"4", "5", "6"}, {});
  CHECK(first.devices == std::vector<std::string>{"4", "5"});
  CHECK_THAT(first.note, Catch::Contains("NVML") && Catch::Contains("first 2"));
}

TEST_CASE("gpu selection: more workers than visible GPUs is a usage error naming both", "[gpu_selection]") {
  CHECK_THROWS_AS(select_gpus_by_free_memory(3, {"0", "1"}, {}), UsageError);
  CHECK_THROWS_WITH(select_gpus_by_free_memory(3, {"0", "1"}, {gpu(0, 1), gpu(1, 1)}),
                    Catch::Contains("3 worker(s)") && Catch::Contains("2 GPU(s) are visible"));
}

TEST_CASE("launch plan: --gpu-ids auto gives each worker one of the emptiest GPUs and a note", "[gpu_selection]") {
  const HostFacts host = host_with(4, {gpu(0, 70), gpu(1, 2), gpu(2, 40), gpu(3, 1)});
  LaunchPlan plan = make_launch_plan(launch_with("2", "auto"), kCommand, host);
  CHECK(plan.nproc == 2);
  CHECK(plan.gpu_for_local_rank == std::vector<std::string>{"GPU-1aaa", "GPU-3aaa"});
  CHECK_THAT(plan.gpu_note, Catch::Contains("--gpu-ids auto"));
  LaunchPlan all = make_launch_plan(launch_with("gpu", "auto"), kCommand, host);
  CHECK(all.nproc == 4);
  CHECK_THROWS_WITH(make_launch_plan(launch_with("cpu", "auto"), kCommand, host),
                    Catch::Contains("--nproc N, gpu or auto"));
  CHECK_THROWS_AS(make_launch_plan(launch_with("5", "auto"), kCommand, host), UsageError);
}

TEST_CASE("launch plan: --gpu-ids auto on a machine without GPUs assigns none and says so", "[gpu_selection]") {
  const HostFacts host = host_with(0, {});
  LaunchPlan plan = make_launch_plan(launch_with("2", "auto"), kCommand, host);
  CHECK(plan.nproc == 2);
  CHECK(plan.gpu_for_local_rank.empty());
  CHECK_THAT(plan.gpu_note, Catch::Contains("no GPU"));
}

TEST_CASE("launch plan: ddp.strategy dp starts one worker that sees every selected GPU", "[gpu_selection]") {
  const HostFacts host = host_with(4, {gpu(0, 70), gpu(1, 2), gpu(2, 40), gpu(3, 1)});
  LaunchPlan listed = make_launch_plan(launch_with("auto", "0,2"), kCommand, host, Strategy::Dp);
  CHECK(listed.nproc == 1);
  CHECK(listed.gpu_for_local_rank == std::vector<std::string>{"0,2"});
  CHECK_THAT(listed.nproc_reason, Catch::Contains("dp: 1 process over 2 GPUs"));
  LaunchPlan everything = make_launch_plan(launch_with("1", ""), kCommand, host, Strategy::Dp);
  CHECK(everything.nproc == 1);
  CHECK(everything.gpu_for_local_rank.empty());  // CUDA_VISIBLE_DEVICES untouched: all visible GPUs
  CHECK_THROWS_WITH(make_launch_plan(launch_with("2", ""), kCommand, host, Strategy::Dp), Catch::Contains("--nproc 1"));
  LaunchConfig two_nodes = launch_with("1", "");
  two_nodes.nnodes = NodeRange::exactly(2);
  two_nodes.master_port = 29500;
  CHECK_THROWS_WITH(make_launch_plan(two_nodes, kCommand, host, Strategy::Dp), Catch::Contains("one node"));
}
