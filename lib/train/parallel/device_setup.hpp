// Which device a rank trains on and how it is prepared: cuda:LOCAL_RANK (or the single GPU a per-rank
// CUDA_VISIBLE_DEVICES leaves visible), the current CUDA device and train.gpu_memory_fraction, the CPU fallback of
// train.device auto, and the process-group backend that goes with the device (ddp.backend auto: nccl on a GPU,
// gloo on the CPU).
#pragma once

#include <string>

#include <c10/core/Device.h>

#include "config/config.hpp"
#include "contract/worker_identity.hpp"

namespace mgtrain {

struct DeviceChoice {
  c10::Device device{c10::kCPU};
  // One line for rank 0 to print when train.device auto fell back to the CPU although the host has NVIDIA GPUs
  // (none visible to this process, or a CPU-only LibTorch); empty otherwise: a CUDA LibTorch on a machine without
  // GPUs just trains on the CPU, as auto says (`mgtrain env` notes it).
  std::string fallback_warning;
};

// Decides, without side effects. train.device cuda without a usable GPU, and a LOCAL_RANK beyond the visible GPUs
// (two ranks would share one; NCCL refuses that), are UsageErrors saying what to change.
DeviceChoice choose_training_device(const TrainConfig& train, const WorkerIdentity& identity);

// For a CUDA device: makes it the current device (before NCCL starts) and caps the caching allocator at
// train.gpu_memory_fraction when that is above 0. Nothing for the CPU.
void prepare_training_device(const c10::Device& device, const TrainConfig& train);

// CUDA: the peak of memory the caching allocator handed out on `device` since the process started, in MiB (what
// torch.cuda.max_memory_allocated reports); -1 for the CPU or a build without CUDA.
double peak_gpu_memory_mib(const c10::Device& device);

// ddp.backend for `device`: auto is nccl on CUDA and gloo on the CPU; an explicit nccl on the CPU is a UsageError
// (this build or this machine has no GPU for it); gloo stays gloo.
std::string resolve_backend(BackendChoice configured, const c10::Device& device);

}  // namespace mgtrain
