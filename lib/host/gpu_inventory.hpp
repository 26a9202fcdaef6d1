// Counts NVIDIA GPUs without CUDA or LibTorch (driver files under /proc and /dev) and applies
// CUDA_VISIBLE_DEVICES, so `--nproc gpu|auto` and `--gpu-ids` work in the torch-free launcher.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mgtrain {

// Number of NVIDIA GPUs the driver exposes below `root` (normally "/"): entries of
// proc/driver/nvidia/gpus, else dev/nvidiaN device nodes. 0 when there is no driver.
int count_nvidia_gpus(const std::string& root = "/");

// The device names a CUDA program would see, in order: "0".."N-1" without CUDA_VISIBLE_DEVICES;
// with it, its entries (indices or GPU-/MIG- UUIDs) up to the first invalid one, as CUDA does.
std::vector<std::string> visible_gpus(int physical_gpu_count, const std::optional<std::string>& cuda_visible_devices);

}  // namespace mgtrain
