// Building what one rank trains with (see training_setup.hpp).
#include "train/loop/training_setup.hpp"

#include <fmt/format.h>
#include <torch/utils.h>

#include "train/loop/optimizer_factory.hpp"
#include "train/parallel/data_parallel.hpp"
#include "train/parallel/device_setup.hpp"
#include "train/parallel/sync_batch_norm.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

// Data: the same data set everywhere; the sampler gives each rank its shard.
void open_data(const Config& config, Communicator& comm, TrainingSetup& setup) {
  const auto seed = static_cast<std::uint64_t>(config.train.seed);
  // Perplexity is reported for the built-in language model, and for any model trained on token data.
  setup.language_model = config.model.type == ModelType::Gpt || config.data.dataset == DatasetKind::Tokens;
  setup.train_data = open_data_source(config.data, Split::Train, config.model.context_length, seed);
  setup.test_data = open_data_source(config.data, Split::Test, config.model.context_length, seed);
  setup.sampler.emplace(setup.train_data->size(), comm.world_size(), comm.rank(), config.data.shuffle, seed,
                        config.data.drop_last);
}

// Model: identical initialisation on every rank from the seed, then rank 0's parameters and buffers are
// broadcast anyway; the reducer registers its gradient hooks.
void build_model_and_reducer(const Config& config, Communicator& comm, TrainingSetup& setup) {
  torch::manual_seed(static_cast<std::uint64_t>(config.train.seed));
  const ModelInput input{setup.train_data->sample_shape(), setup.train_data->num_classes()};
  setup.model =
      config.ddp.strategy == Strategy::Dp  // legacy DataParallel: one process, the model replicated over its GPUs
          ? build_data_parallel_model(config.model, input,
                                      data_parallel_devices(comm.world_size(), config.train.precision))
          : build_model(config.model, input);
  setup.model->to(setup.device);
  setup.synchronised_batch_norms = apply_sync_batch_norm(config.ddp, *setup.model, comm);  // ddp.sync_batch_norm
  setup.model->train(true);
  for (auto& [name, p] : setup.model->named_parameters()) setup.parameters.push_back(p);
  for (auto& [name, b] : setup.model->named_buffers()) setup.buffers.push_back(b);
  std::vector<at::Tensor> state = setup.parameters;
  state.insert(state.end(), setup.buffers.begin(), setup.buffers.end());
  comm.broadcast_coalesced(state, 0);

  ReducerOptions options;
  options.bucket_cap_mb = config.ddp.bucket_cap_mb;
  options.first_bucket_mb = config.ddp.first_bucket_mb;
  options.find_unused_parameters = config.ddp.find_unused_parameters;
  options.gradient_as_bucket_view = config.ddp.gradient_as_bucket_view;
  options.skip_communication = config.ddp.skip_allreduce;
  options.gradients_prescaled = true;  // the loss is divided by accum x world in the step
  setup.reducer = std::make_unique<GradientReducer>(setup.model->named_parameters(), comm, options);
}

// How many steps, and the optimizer with its learning-rate schedule over them.
void plan_steps_and_optimizer(const Config& config, Communicator& comm, TrainingSetup& setup) {
  const TrainConfig& train = config.train;
  const std::int64_t per_rank = setup.sampler->samples_per_rank();
  const std::int64_t batches_per_epoch =
      config.data.drop_last ? per_rank / train.batch_size : (per_rank + train.batch_size - 1) / train.batch_size;
  setup.steps_per_epoch = batches_per_epoch / train.grad_accum_steps;
  if (setup.steps_per_epoch < 1) {
    throw UsageError(
        fmt::format("train.batch_size {} x train.grad_accum_steps {} is more than this rank's {} samples per epoch "
                    "({} in all over {} ranks): lower them",
                    train.batch_size, train.grad_accum_steps, per_rank, setup.train_data->size(), comm.world_size()));
  }
  setup.total_steps = train.max_steps > 0 ? train.max_steps : setup.steps_per_epoch * train.epochs;
  const double peak_lr = config.optim.lr * (config.optim.scale_lr_with_world_size ? comm.world_size() : 1);
  setup.schedule.emplace(config.optim, peak_lr, setup.total_steps);
  setup.optimizer = make_optimizer(config.optim, setup.parameters, setup.schedule->at(0));
}

}  // namespace

TrainingSetup set_up_training(const Config& config, const WorkerIdentity& id, Communicator& comm) {
  TrainingSetup setup;
  setup.device = choose_training_device(config.train, id).device;
  setup.precision = resolve_precision(config.train.precision, setup.device);  // fp16 on a CPU is refused here
  open_data(config, comm, setup);
  build_model_and_reducer(config, comm, setup);
  plan_steps_and_optimizer(config, comm, setup);
  return setup;
}

}  // namespace mgtrain
