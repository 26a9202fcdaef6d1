// Device choice and preparation for one rank (see device_setup.hpp).
#include "train/parallel/device_setup.hpp"

#include <fmt/format.h>
#include <torch/cuda.h>

#ifdef MGTRAIN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "host/gpu_inventory.hpp"
#include "train/torch/torch_compat.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace mgtrain {
namespace {

// Whether this build links a CUDA LibTorch (whether a GPU is visible is torch::cuda::is_available()).
constexpr bool torch_has_cuda() {
#ifdef MGTRAIN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace

DeviceChoice choose_training_device(const TrainConfig& train, const WorkerIdentity& id) {
  DeviceChoice choice;
  const bool cuda = torch::cuda::is_available();
  if (train.device == DeviceOption::Cuda && !cuda) {
    throw UsageError(fmt::format("train.device: cuda was asked for, but {} (use train.device: auto or cpu)",
                                 torch_has_cuda() ? "no GPU is visible to this process"
                                                  : "this LibTorch has no CUDA (build with scripts/build-cuda.sh)"));
  }
  if (train.device == DeviceOption::Cpu) return choice;
  if (!cuda) {
    // auto on a machine without GPUs is the CPU, said by nothing (`mgtrain env` notes it); only GPUs this process
    // cannot use are worth a warning.
    const int host_gpus = count_nvidia_gpus("/");
    if (host_gpus > 0) {
      choice.fallback_warning =
          fmt::format("train.device auto: the host has {} NVIDIA GPU{} but {}; training on the CPU with gloo",
                      host_gpus, host_gpus == 1 ? "" : "s",
                      torch_has_cuda() ? "this process sees none (CUDA_VISIBLE_DEVICES? the driver?)"
                                       : "this build's LibTorch is CPU-only (see scripts/build-cuda.sh)");
    }
    return choice;
  }
  const auto visible = static_cast<int>(torch::cuda::device_count());
  int index = 0;
  if (visible > 1) {
    if (id.local_rank >= visible) {
      throw UsageError(
          fmt::format("LOCAL_RANK {} has no GPU of its own: this process sees {} GPUs (cuda:0..cuda:{}), and two ranks "
                      "on one GPU are refused by NCCL; start at most {} workers per node (--nproc {}) or choose GPUs "
                      "with --gpu-ids",
                      id.local_rank, visible, visible - 1, visible, visible));
    }
    index = id.local_rank;
  }
  choice.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  return choice;
}

void prepare_training_device(const c10::Device& device, const TrainConfig& train) {
  if (!device.is_cuda()) return;
#ifdef MGTRAIN_WITH_CUDA
  c10::cuda::set_device(device.index());
  if (train.gpu_memory_fraction > 0) {
    torch_compat::lazy_init_cuda();  // the caching allocator exists only once CUDA is initialised
    c10::cuda::CUDACachingAllocator::setMemoryFraction(train.gpu_memory_fraction, device.index());
  }
#else
  (void)train;
#endif
}

double peak_gpu_memory_mib(const c10::Device& device) {
#ifdef MGTRAIN_WITH_CUDA
  if (!device.is_cuda()) return -1;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  // Index 0 is StatType::AGGREGATE (all pools) in every version; the enum itself moved between namespaces.
  return static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);
#else
  (void)device;
  return -1;
#endif
}

std::string resolve_backend(BackendChoice configured, const c10::Device& device) {
  if (configured == BackendChoice::Auto) return device.is_cuda() ? "nccl" : "gloo";
  if (configured == BackendChoice::Nccl && !device.is_cuda()) {
    throw UsageError(fmt::format(
        "ddp.backend: nccl needs a GPU, but this rank trains on {} ({}): use ddp.backend: gloo or auto", device.str(),
        torch_has_cuda() ? "no GPU is visible, or train.device is cpu" : "this LibTorch is CPU-only"));
  }
  return std::string(name_of(configured));
}

}  // namespace mgtrain
