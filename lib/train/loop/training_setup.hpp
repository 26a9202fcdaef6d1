// What one rank trains with, built once before the first step (run_training, trainer.cpp): the device and
// precision, the data set and this rank's sampler, the model (broadcast from rank 0) with its gradient reducer,
// the number of steps, and the optimizer with its learning-rate schedule.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <torch/optim/optimizer.h>

#include "config/config.hpp"
#include "contract/worker_identity.hpp"
#include "train/data/data_source.hpp"
#include "train/data/distributed_sampler.hpp"
#include "train/loop/lr_schedule.hpp"
#include "train/loop/mixed_precision.hpp"
#include "train/models/model.hpp"
#include "train/parallel/communicator.hpp"
#include "train/parallel/gradient_reducer.hpp"

namespace mgtrain {

// Everything one rank trains with, built once before the first step.
struct TrainingSetup {
  torch::Device device{torch::kCPU};
  Precision precision;
  bool language_model = false;
  std::unique_ptr<DataSource> train_data, test_data;
  std::optional<DistributedSampler> sampler;
  std::unique_ptr<Model> model;
  int synchronised_batch_norms = 0;
  std::vector<at::Tensor> parameters, buffers;
  std::unique_ptr<GradientReducer> reducer;
  std::int64_t steps_per_epoch = 0, total_steps = 0;
  std::optional<LrSchedule> schedule;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

// Collective (the model broadcast). Throws UsageError for settings that cannot train (e.g. a batch larger than
// the shard, fp16 on a CPU).
TrainingSetup set_up_training(const Config& config, const WorkerIdentity& id, Communicator& comm);

}  // namespace mgtrain
