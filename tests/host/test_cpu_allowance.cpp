// The CPUs a launcher may use (host/cpu_allowance.hpp): its real affinity mask (narrowed with sched_setaffinity),
// cgroup v2 and v1 quotas in a folder laid out like / (the tightest on the way to the root wins), and the key that
// tells which launchers share CPUs.
#include <catch2/catch.hpp>

#include <sched.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "host/cpu_allowance.hpp"
#include "support/temp_dir.hpp"

using namespace mgtrain;
namespace fs = std::filesystem;

namespace {

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// Restores this process's affinity mask when it goes.
class AffinityRestorer {
 public:
  AffinityRestorer() { sched_getaffinity(0, sizeof saved_, &saved_); }
  ~AffinityRestorer() { sched_setaffinity(0, sizeof saved_, &saved_); }
  AffinityRestorer(const AffinityRestorer&) = delete;
  AffinityRestorer& operator=(const AffinityRestorer&) = delete;

 private:
  cpu_set_t saved_{};
};

}  // namespace

TEST_CASE("cpu allowance: the affinity mask is what this process may run on", "[cpus]") {
  const CpuAllowance all = read_cpu_allowance("/nonexistent-root");
  REQUIRE(!all.affinity.empty());
  CHECK(all.usable() == static_cast<int>(all.affinity.size()));
  CHECK_FALSE(all.quota_cpus.has_value());
  CHECK(all.boot_id.empty());
  CHECK(all.sharing_key().empty());  // no boot id: sharing with nobody

  AffinityRestorer restore;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(all.affinity.back(), &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const CpuAllowance narrowed = read_cpu_allowance("/nonexistent-root");
  CHECK(narrowed.affinity == std::vector<int>{all.affinity.back()});
  CHECK(narrowed.usable() == 1);
  CHECK(narrowed.describe() == "1 CPU (affinity " + std::to_string(all.affinity.back()) + ")");
}

TEST_CASE("cpu allowance: the affinity list is written as the kernel writes CPU lists", "[cpus]") {
  CpuAllowance cpus;
  cpus.affinity = {0, 1, 2, 3, 8, 10, 11};
  CHECK(cpus.affinity_text() == "0-3,8,10-11");
  cpus.boot_id = "b00t";
  CHECK(cpus.sharing_key() == "b00t/0-3,8,10-11");
  CHECK(cpus.usable() == 7);
}

TEST_CASE("cpu allowance: cgroup v2 cpu.max, the tightest quota up to the root", "[cpus]") {
  testing::TempDir root("mgtrain-cpus");
  write(root / "proc/self/cgroup", "0::/job.slice/step_0\n");
  write(root / "proc/sys/kernel/random/boot_id", "4f1e-boot\n");
  write(root / "sys/fs/cgroup/job.slice/step_0/cpu.max", "max 100000\n");  // no quota of its own
  write(root / "sys/fs/cgroup/job.slice/cpu.max", "150000 100000\n");      // 1.5 CPUs for the whole slice
  const CpuAllowance cpus = read_cpu_allowance(root.path());
  REQUIRE(cpus.quota_cpus.has_value());
  CHECK(*cpus.quota_cpus == Approx(1.5));
  CHECK(cpus.quota_file == "/sys/fs/cgroup/job.slice/cpu.max");
  CHECK(cpus.usable() == 1);  // whole CPUs only, never more than the quota
  CHECK(cpus.boot_id == "4f1e-boot");
  CHECK_THAT(cpus.describe(), Catch::StartsWith("1 CPU (cgroup quota 1.5 CPUs, affinity "));

  write(root / "sys/fs/cgroup/job.slice/step_0/cpu.max", "50000 100000\n");  // half a CPU: still one thread
  CHECK(*read_cpu_allowance(root.path()).quota_cpus == Approx(0.5));
  CHECK(read_cpu_allowance(root.path()).usable() == 1);
}

TEST_CASE("cpu allowance: cgroup v1 cfs quota, in a container whose cgroup path is not mounted", "[cpus]") {
  testing::TempDir root("mgtrain-cpus");
  // Docker without a cgroup namespace: /proc/self/cgroup names the host's path, the mount is the container's own.
  write(root / "proc/self/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n");
  write(root / "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "400000\n");
  write(root / "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  CpuAllowance cpus = read_cpu_allowance(root.path());
  REQUIRE(cpus.quota_cpus.has_value());
  CHECK(*cpus.quota_cpus == Approx(4.0));
  CHECK(cpus.quota_file == "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us");
  CHECK(cpus.usable() == std::min(4, static_cast<int>(cpus.affinity.size())));

  write(root / "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");  // unlimited
  CHECK_FALSE(read_cpu_allowance(root.path()).quota_cpus.has_value());
  write(root / "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "lots\n");  // malformed: no quota, not a guess
  CHECK_FALSE(read_cpu_allowance(root.path()).quota_cpus.has_value());
}

TEST_CASE("cpu allowance: this machine's boot id makes the key", "[cpus]") {
  if (!fs::exists("/proc/sys/kernel/random/boot_id")) {
    WARN("SKIP: this kernel has no /proc/sys/kernel/random/boot_id");
    return;
  }
  const CpuAllowance cpus = read_cpu_allowance();
  CHECK(cpus.boot_id.size() == 36);
  CHECK(cpus.sharing_key() == cpus.boot_id + "/" + cpus.affinity_text());
}
