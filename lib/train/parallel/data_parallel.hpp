// ddp.strategy dp: the legacy single-process DataParallel. One process holds the master model on the first GPU;
// every forward scatters the batch over the selected GPUs, replicates the model onto them and gathers the outputs
// back (LibTorch's torch::nn::parallel::data_parallel), and backward sums the replicas' gradients into the master's.
// It is slower than ddp (one process per GPU, no replication per step) and kept for compatibility; a CPU-only
// build, a machine without GPUs, more than one process, and autocast (whose switch is per thread and does not reach
// the replica threads) are refused.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "config/config.hpp"
#include "train/models/model.hpp"

namespace mgtrain {

// The CUDA devices this process sees (all of them: the launcher narrows them with CUDA_VISIBLE_DEVICES), after the
// checks above; `world_size` and `precision` are the run's. Throws UsageError saying what to change.
std::vector<c10::Device> data_parallel_devices(int world_size, PrecisionMode precision);

// The model of `config` as a DataParallel model over `devices` (the first is the master's and the output's).
// Parameters and buffers are the master's, under the same names as build_model's, so checkpoints are the same.
// Works with one device (no replication); several need a CUDA build (data_parallel's header includes CUDA's).
// model.type torchscript is refused (it cannot be rebuilt per replica).
std::unique_ptr<Model> build_data_parallel_model(const ModelConfig& config, const ModelInput& input,
                                                 std::vector<c10::Device> devices);

// For tests: clones the replica that data_parallel would put on devices[i] (the same clone()) and runs chunk i on
// it, returning each output. The gradient edges back to the master are data_parallel's own (CUDA builds).
std::vector<at::Tensor> forward_replicas_for_test(Model& model, const std::vector<at::Tensor>& chunks,
                                                  const std::vector<c10::Device>& devices);

}  // namespace mgtrain
