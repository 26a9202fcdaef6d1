// Reads the machine's facts (host/cpu_allowance: affinity mask, cgroup quota; gethostname, getcwd, NVIDIA driver
// files).
#include "launch/host_probe.hpp"

#include <unistd.h>

#include <cerrno>
#include <climits>

#include "host/cpu_allowance.hpp"
#include "host/gpu_inventory.hpp"
#include "host/nvml_library.hpp"
#include "util/error.hpp"

namespace mgtrain {

HostFacts probe_host_facts(const EnvMap& environment) {
  HostFacts host;
  std::optional<std::string> cuda_visible;
  auto found = environment.find("CUDA_VISIBLE_DEVICES");
  if (found != environment.end()) cuda_visible = found->second;
  host.cuda_visible_devices_set = cuda_visible.has_value();
  host.cuda_visible_devices = cuda_visible.value_or("");
  host.visible_gpus = visible_gpus(count_nvidia_gpus("/"), cuda_visible);
  host.gpu_stats = [] {
    auto nvml = open_nvml();
    return nvml ? nvml->sample() : std::vector<GpuSample>{};
  };

  host.cpus = read_cpu_allowance();

  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) == 0) host.hostname = name;
  if (host.hostname.empty()) host.hostname = "localhost";

  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == nullptr) throw SystemError("getcwd()", errno);
  host.cwd = cwd;
  return host;
}

}  // namespace mgtrain
