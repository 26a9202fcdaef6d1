// The CPUs this process may use: its affinity mask and its cgroup's CPU quota (cgroup v2 cpu.max, v1
// cpu.cfs_quota_us / cpu.cfs_period_us, the tightest on the way from its cgroup to the root), and which other
// processes share them (a key: the kernel's boot id and the affinity mask). The launcher divides them among the workers
// it starts (supervise/worker_env.hpp, choose_worker_threads), so that their OpenMP threads do not oversubscribe the
// CPUs.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mgtrain {

struct CpuAllowance {
  std::vector<int> affinity;         // the CPUs of the affinity mask, ascending
  std::optional<double> quota_cpus;  // the cgroup's CPU quota in CPUs (1.5: 150 ms per 100 ms); none: no quota
  std::string quota_file;            // the file that gave it, e.g. /sys/fs/cgroup/job.slice/cpu.max
  std::string boot_id;               // /proc/sys/kernel/random/boot_id: one kernel, one set of CPUs; empty: unknown

  // What the workers may use in all: the affinity mask's CPUs, at most the quota's whole CPUs, at least 1.
  int usable() const;
  // "0-3,8" (the affinity mask as the kernel writes CPU lists).
  std::string affinity_text() const;
  // "2 CPUs (affinity 0-1)", or "2 CPUs (cgroup quota 2.5 CPUs, affinity 0-63)".
  std::string describe() const;
  // Processes with the same key run on the same CPUs of the same machine (containers and network namespaces
  // included): "<boot id>/<affinity>". Empty when the boot id is unknown: then nothing is known to share.
  std::string sharing_key() const;
};

// This process's allowance. `root` prefixes every path read (tests give a folder laid out like / with
// proc/self/cgroup, proc/sys/kernel/random/boot_id and sys/fs/cgroup/...); the affinity is this process's own.
CpuAllowance read_cpu_allowance(const std::string& root = "/");
// The kernel's boot id (root/proc/sys/kernel/random/boot_id, trimmed): the same for every process of one machine,
// containers and namespaces included; empty when it cannot be read.
std::string read_boot_id(const std::string& root = "/");

}  // namespace mgtrain
