// Choosing the GPUs with the most free memory for `--gpu-ids auto` (see gpu_selection.hpp).
#include "host/gpu_selection.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

const GpuSample* sample_for(const std::string& entry, const std::vector<GpuSample>& samples) {
  for (const auto& sample : samples) {
    if (!sample.uuid.empty() && sample.uuid == entry) return &sample;
    if (entry.find_first_not_of("0123456789") == std::string::npos && !entry.empty() &&
        std::to_string(sample.index) == entry) {
      return &sample;
    }
  }
  return nullptr;
}

}  // namespace

GpuSelection select_gpus_by_free_memory(int count, const std::vector<std::string>& visible,
                                        const std::vector<GpuSample>& samples) {
  const int available = static_cast<int>(visible.size());
  if (count < 1 || count > available) {
    throw UsageError(
        fmt::format("launch.gpu_ids auto: {} worker(s) need {} GPU(s), but {} GPU(s) are visible: lower --nproc, or "
                    "make more GPUs visible (CUDA_VISIBLE_DEVICES)",
                    count, count, available));
  }
  GpuSelection selection;
  if (samples.empty()) {
    selection.devices.assign(visible.begin(), visible.begin() + count);
    selection.note = fmt::format(
        "mgtrain: --gpu-ids auto: no GPU statistics (NVML could not be loaded); using the first {} visible "
        "GPU(s): {}",
        count, fmt::join(selection.devices, ","));
    return selection;
  }
  struct Candidate {
    int position;
    const GpuSample* sample;
    std::int64_t free_bytes;  // -1: unknown
  };
  std::vector<Candidate> candidates;
  for (int i = 0; i < available; ++i) {
    const GpuSample* sample = sample_for(visible[i], samples);
    std::int64_t free_bytes = -1;
    if (sample && sample->memory_total_bytes >= 0 && sample->memory_used_bytes >= 0) {
      free_bytes = std::max<std::int64_t>(0, sample->memory_total_bytes - sample->memory_used_bytes);
    }
    candidates.push_back({i, sample, free_bytes});
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.free_bytes > b.free_bytes; });
  candidates.resize(static_cast<std::size_t>(count));
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.position < b.position; });
  std::vector<std::string> described;
  for (const auto& c : candidates) {
    const bool has_uuid = c.sample && !c.sample->uuid.empty();
    selection.devices.push_back(has_uuid ? c.sample->uuid : visible[c.position]);
    described.push_back(c.free_bytes >= 0 ? fmt::format("{} ({:.1f} GiB free)", visible[c.position],
                                                        static_cast<double>(c.free_bytes) / (1024.0 * 1024.0 * 1024.0))
                                          : fmt::format("{} (free memory unknown)", visible[c.position]));
  }
  selection.note = fmt::format("mgtrain: --gpu-ids auto: the {} of {} visible GPU(s) with the most free memory: {}",
                               count, available, fmt::join(described, ", "));
  return selection;
}

}  // namespace mgtrain
