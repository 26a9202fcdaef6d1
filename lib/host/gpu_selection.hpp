// `--gpu-ids auto`: which GPUs a node's workers get. Pure: the GPUs CUDA would see and NVML's statistics come in,
// the choice and a line saying why come out (the launcher prints it).
#pragma once

#include <string>
#include <vector>

#include "host/nvml_library.hpp"

namespace mgtrain {

struct GpuSelection {
  std::vector<std::string> devices;  // per local rank, for CUDA_VISIBLE_DEVICES (a UUID when NVML gave one)
  std::string note;                  // one line: what was chosen and why
};

// The `count` GPUs with the most free memory (total - used) among `visible` (entries as CUDA_VISIBLE_DEVICES
// holds them: indices, matched with NVML's index, or GPU- UUIDs, matched with NVML's uuid). GPUs NVML says
// nothing about (or without memory figures) come after those it measured; ties keep the visible order. The
// chosen GPUs are returned in visible order. `samples` empty (no NVML): the first `count` visible GPUs, and the
// note says so. count < 1 or more than visible is a UsageError naming both numbers.
GpuSelection select_gpus_by_free_memory(int count, const std::vector<std::string>& visible,
                                        const std::vector<GpuSample>& samples);

}  // namespace mgtrain
