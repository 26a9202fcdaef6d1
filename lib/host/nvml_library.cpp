// The real GpuStatsSource: NVML loaded with dlopen at run time (see nvml_library.hpp). The few NVML types and
// entry points used are declared here by hand (they are a stable C ABI), so no NVML header or library is
// needed to build; a machine without the driver gets nullptr from open_nvml.
#include "host/nvml_library.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

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

// Every signal blocked on the calling thread while it calls into NVML. NVML and the driver under it start threads of
// their own, which inherit the mask of the thread that makes them, and a thread with the launcher's signals unblocked
// takes them before the supervisor's signalfd can read them: a SIGCHLD taken there is discarded (its default
// disposition), and the launcher never learns that a worker exited. Seen on an H200: `--gpu-ids auto` asks NVML before
// the supervisor blocks its signals, and the launcher waited forever beside its exited worker (docs/gpu.md).
class SignalsBlockedHere {
 public:
  SignalsBlockedHere() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved_);
  }
  ~SignalsBlockedHere() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  SignalsBlockedHere(const SignalsBlockedHere&) = delete;
  SignalsBlockedHere& operator=(const SignalsBlockedHere&) = delete;

 private:
  sigset_t saved_{};
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
    const SignalsBlockedHere blocked;
    f_.shutdown();
    dlclose(handle_);
  }
  NvmlStats(const NvmlStats&) = delete;
  NvmlStats& operator=(const NvmlStats&) = delete;

  std::vector<GpuSample> sample() override {
    const SignalsBlockedHere blocked;
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
    const SignalsBlockedHere blocked;
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
  const SignalsBlockedHere blocked;
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
