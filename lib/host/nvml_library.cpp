// The real GpuStatsSource: NVML loaded with dlopen at run time (see nvml_library.hpp). The few NVML types and
// entry points used are declared here by hand (they are a stable C ABI), so no NVML header or library is
// needed to build; a machine without the driver gets nullptr from open_nvml.
#include "host/nvml_library.hpp"

#include <dlfcn.h>

#include <cstring>

namespace mgtrain {
namespace {

// NVML's C ABI, as far as we use it (nvml.h: nvmlReturn_t is an enum, 0 = NVML_SUCCESS).
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned kNvmlTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
struct NvmlMemory {                          // nvmlMemory_t (v1): bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlUtilization {  // nvmlUtilization_t: percent
  unsigned int gpu;
  unsigned int memory;
};

struct NvmlFunctions {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  NvmlReturn (*device_count)(unsigned int*);
  NvmlReturn (*handle_by_index)(unsigned int, NvmlDevice*);
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int);
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned int);
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*);
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*);
  NvmlReturn (*temperature)(NvmlDevice, unsigned int, unsigned int*);
  NvmlReturn (*power_mw)(NvmlDevice, unsigned int*);
  NvmlReturn (*driver_version)(char*, unsigned int);
};

template <typename F>
bool bind(void* handle, const char* symbol, F& out) {
  void* p = dlsym(handle, symbol);
  if (p == nullptr) return false;
  static_assert(sizeof(F) == sizeof(void*), "function pointer size");
  std::memcpy(&out, &p, sizeof p);
  return true;
}

class NvmlStats final : public GpuStatsSource {
 public:
  NvmlStats(void* handle, const NvmlFunctions& f) : handle_(handle), f_(f) {}
  ~NvmlStats() override {
    f_.shutdown();
    dlclose(handle_);
  }
  NvmlStats(const NvmlStats&) = delete;
  NvmlStats& operator=(const NvmlStats&) = delete;

  std::vector<GpuSample> sample() override {
    std::vector<GpuSample> gpus;
    unsigned int count = 0;
    if (f_.device_count(&count) != kNvmlSuccess) return gpus;
    for (unsigned int i = 0; i < count; ++i) {
      NvmlDevice device = nullptr;
      GpuSample gpu;
      gpu.index = static_cast<int>(i);
      if (f_.handle_by_index(i, &device) != kNvmlSuccess) {
        gpus.push_back(gpu);  // index only: the driver lists it but will not say more
        continue;
      }
      char text[128] = {};
      if (f_.name(device, text, sizeof text) == kNvmlSuccess) gpu.name = text;
      std::memset(text, 0, sizeof text);
      if (f_.uuid(device, text, sizeof text) == kNvmlSuccess) gpu.uuid = text;
      NvmlMemory memory{};
      if (f_.memory(device, &memory) == kNvmlSuccess) {
        gpu.memory_used_bytes = static_cast<std::int64_t>(memory.used);
        gpu.memory_total_bytes = static_cast<std::int64_t>(memory.total);
      }
      NvmlUtilization utilization{};
      if (f_.utilization(device, &utilization) == kNvmlSuccess)
        gpu.utilization_percent = static_cast<int>(utilization.gpu);
      unsigned int value = 0;
      if (f_.temperature(device, kNvmlTemperatureGpu, &value) == kNvmlSuccess)
        gpu.temperature_c = static_cast<int>(value);
      if (f_.power_mw(device, &value) == kNvmlSuccess) gpu.power_w = value / 1000.0;
      gpus.push_back(std::move(gpu));
    }
    return gpus;
  }

  std::string driver_version() override {
    char text[96] = {};
    if (f_.driver_version(text, sizeof text) != kNvmlSuccess) return "";
    return text;
  }

 private:
  void* handle_;
  NvmlFunctions f_;
};

}  // namespace

std::unique_ptr<GpuStatsSource> open_nvml(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  NvmlFunctions f{};
  const bool complete =
      bind(handle, "nvmlInit_v2", f.init) && bind(handle, "nvmlShutdown", f.shutdown) &&
      bind(handle, "nvmlDeviceGetCount_v2", f.device_count) &&
      bind(handle, "nvmlDeviceGetHandleByIndex_v2", f.handle_by_index) && bind(handle, "nvmlDeviceGetName", f.name) &&
      bind(handle, "nvmlDeviceGetUUID", f.uuid) && bind(handle, "nvmlDeviceGetMemoryInfo", f.memory) &&
      bind(handle, "nvmlDeviceGetUtilizationRates", f.utilization) &&
      bind(handle, "nvmlDeviceGetTemperature", f.temperature) && bind(handle, "nvmlDeviceGetPowerUsage", f.power_mw) &&
      bind(handle, "nvmlSystemGetDriverVersion", f.driver_version);
  if (!complete || f.init() != kNvmlSuccess) {
    dlclose(handle);
    return nullptr;
  }
  return std::make_unique<NvmlStats>(handle, f);
}

}  // namespace mgtrain
