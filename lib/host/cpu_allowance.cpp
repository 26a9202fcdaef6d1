// Reads the affinity mask (sched_getaffinity), the cgroup's CPU quota and the boot id (see cpu_allowance.hpp).
#include "host/cpu_allowance.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "util/file_io.hpp"
#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

std::string with_slash(const std::string& root) { return root.empty() || root.back() == '/' ? root : root + "/"; }

// The affinity mask's CPUs; when it cannot be read, the online CPUs (at least one).
std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  } else {
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; cpu < online && cpu < CPU_SETSIZE; ++cpu) cpus.push_back(static_cast<int>(cpu));
  }
  return cpus.empty() ? std::vector<int>{0} : cpus;
}

// A quota file's CPUs: v2 "max 100000" / "150000 100000"; v1 the quota and the period, each alone in its file.
std::optional<double> quota_of(const std::string& quota_text, const std::string& period_text) {
  const std::optional<std::int64_t> quota = parse_int(trim(quota_text));
  const std::optional<std::int64_t> period = parse_int(trim(period_text));
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;  // "max", -1 or malformed: no quota
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

struct Quota {
  std::optional<double> cpus;
  std::string file;
};

// The tightest quota from `dir`/`cgroup` up to `dir` itself (a quota limits every cgroup below it).
template <class ReadAt>
Quota tightest_quota(const std::string& dir, std::string cgroup, const ReadAt& read_at) {
  Quota tightest;
  for (;;) {
    const std::string here = dir + (cgroup == "/" ? "" : cgroup);
    if (std::optional<double> cpus = read_at(here); cpus && (!tightest.cpus || *cpus < *tightest.cpus)) {
      tightest = {cpus, here};
    }
    if (cgroup == "/" || cgroup.empty()) return tightest;
    const std::size_t slash = cgroup.rfind('/');
    cgroup = slash == 0 || slash == std::string::npos ? "/" : cgroup.substr(0, slash);
  }
}

Quota cgroup_quota(const std::string& root) {
  const std::optional<std::string> membership = try_read_file(root + "proc/self/cgroup");
  if (!membership) return {};
  for (const std::string& line : split_lines(*membership)) {
    // "hierarchy-id:controllers:path"; v2 is "0::path", v1's CPU controller "N:cpu,cpuacct:path".
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (path.empty() || path[0] != '/') continue;
    if (controllers.empty()) {
      Quota quota = tightest_quota(root + "sys/fs/cgroup", path, [](const std::string& dir) -> std::optional<double> {
        const std::optional<std::string> text = try_read_file(dir + "/cpu.max");
        if (!text) return std::nullopt;
        const std::string fields = trim(*text);  // "QUOTA PERIOD"
        const std::size_t space = fields.find(' ');
        return space == std::string::npos ? std::nullopt : quota_of(fields.substr(0, space), fields.substr(space + 1));
      });
      if (quota.cpus) return {quota.cpus, quota.file + "/cpu.max"};
      continue;
    }
    const std::vector<std::string> names = split(controllers, ',');
    if (std::find(names.begin(), names.end(), "cpu") == names.end()) continue;
    for (const std::string& mount : {controllers, std::string("cpu")}) {
      Quota quota = tightest_quota(root + "sys/fs/cgroup/" + mount, path, [](const std::string& dir) {
        const std::optional<std::string> quota_text = try_read_file(dir + "/cpu.cfs_quota_us");
        const std::optional<std::string> period_text = try_read_file(dir + "/cpu.cfs_period_us");
        return quota_text && period_text ? quota_of(*quota_text, *period_text) : std::nullopt;
      });
      if (quota.cpus) return {quota.cpus, quota.file + "/cpu.cfs_quota_us"};
    }
  }
  return {};
}

}  // namespace

int CpuAllowance::usable() const {
  int cpus = std::max(static_cast<int>(affinity.size()), 1);
  if (quota_cpus) cpus = std::min(cpus, std::max(static_cast<int>(std::floor(*quota_cpus + 1e-9)), 1));
  return cpus;
}

std::string CpuAllowance::affinity_text() const {
  std::string text;
  for (std::size_t i = 0; i < affinity.size();) {
    std::size_t end = i;
    while (end + 1 < affinity.size() && affinity[end + 1] == affinity[end] + 1) ++end;
    text += (text.empty() ? "" : ",") + std::to_string(affinity[i]) +
            (end > i ? "-" + std::to_string(affinity[end]) : std::string());
    i = end + 1;
  }
  return text;
}

std::string CpuAllowance::describe() const {
  const int cpus = usable();
  const std::string count = fmt::format("{} CPU{}", cpus, cpus == 1 ? "" : "s");
  if (!quota_cpus) return fmt::format("{} (affinity {})", count, affinity_text());
  return fmt::format("{} (cgroup quota {:g} CPUs, affinity {})", count, *quota_cpus, affinity_text());
}

std::string CpuAllowance::sharing_key() const { return boot_id.empty() ? "" : boot_id + "/" + affinity_text(); }

CpuAllowance read_cpu_allowance(const std::string& root) {
  const std::string base = with_slash(root);
  CpuAllowance allowance;
  allowance.affinity = affinity_cpus();
  const Quota quota = cgroup_quota(base);
  allowance.quota_cpus = quota.cpus;
  allowance.quota_file = quota.file.empty() ? "" : quota.file.substr(base.size() - 1);
  allowance.boot_id = read_boot_id(base);
  return allowance;
}

std::string read_boot_id(const std::string& root) {
  return trim(try_read_file(with_slash(root) + "proc/sys/kernel/random/boot_id").value_or(""));
}

}  // namespace mgtrain
