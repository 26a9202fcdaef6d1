// GPU statistics through NVML (libnvidia-ml.so.1), loaded at run time with dlopen: no build dependency,
// and a machine without the NVIDIA driver simply has no GPU statistics (open() returns nullptr), never an error.
// Used by the resource sampler (per-GPU utilisation, memory, temperature, power), the GPU health line at
// start, and `--gpu-ids auto` (the GPUs with the most free memory).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mgtrain {

// One GPU at one moment. Fields NVML could not read are negative (or empty for strings).
struct GpuSample {
  int index = -1;    // NVML index (the driver's order, as nvidia-smi shows it)
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::string uuid;  // "GPU-...", as CUDA_VISIBLE_DEVICES accepts it
  std::int64_t memory_used_bytes = -1;
  std::int64_t memory_total_bytes = -1;
  int utilization_percent = -1;  // GPU busy time over the driver's last sample period
  int temperature_c = -1;
  double power_w = -1.0;
};

// Where the GPU statistics come from; tests use a fake.
class GpuStatsSource {
 public:
  virtual ~GpuStatsSource() = default;
  virtual std::vector<GpuSample> sample() = 0;  // every GPU the driver shows, in index order
  virtual std::string driver_version() = 0;     // "" when unknown
};

// The real NVML: nullptr when libnvidia-ml.so.1 cannot be loaded or nvmlInit fails (no driver, no GPU).
// `library` overrides the file name (tests point it at a file that is not NVML).
std::unique_ptr<GpuStatsSource> open_nvml(const std::string& library = "libnvidia-ml.so.1");

}  // namespace mgtrain
