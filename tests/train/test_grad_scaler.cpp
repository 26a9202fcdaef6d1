// The fp16 loss scaler's decisions on CPU tensors with injected inf/nan gradients (skip, backoff, growth), the
// unscaling, its option checks, and its state through a real checkpoint file and back (and a checkpoint without it).
#include "train/catch_with_torch.hpp"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include "config/config.hpp"
#include "contract/worker_identity.hpp"
#include "train/loop/checkpointing.hpp"
#include "train/loop/grad_scaler.hpp"
#include "train/loop/optimizer_factory.hpp"
#include "train/models/model.hpp"
#include "train/parallel/communicator.hpp"
#include "train/state/train_state.hpp"
#include "train/train_test_support.hpp"
#include "util/error.hpp"

using namespace mgtrain;

namespace {

GradScalerOptions fp16_options(double init = 1024.0, std::int64_t interval = 3) {
  GradScalerOptions options;
  options.enabled = true;
  options.init_scale = init;
  options.growth_factor = 2.0;
  options.backoff_factor = 0.5;
  options.growth_interval = interval;
  return options;
}

// Two parameters whose gradients are `scale` times 1..n, as backward of a scaled loss leaves them.
std::vector<at::Tensor> parameters_with_scaled_grads(double scale) {
  std::vector<at::Tensor> params{at::zeros({3}, at::requires_grad()), at::zeros({2, 2}, at::requires_grad())};
  params[0].mutable_grad() = at::arange(1, 4, at::kFloat) * scale;
  params[1].mutable_grad() = at::arange(1, 5, at::kFloat).view({2, 2}) * scale;
  return params;
}

}  // namespace

TEST_CASE("loss scaler: finite gradients are unscaled exactly and the step is taken", "[scaler]") {
  GradScaler scaler(fp16_options());
  REQUIRE(scaler.scale() == 1024.0);
  auto params = parameters_with_scaled_grads(scaler.scale());
  CHECK_FALSE(scaler.unscale_and_check(params));
  CHECK(at::equal(params[0].grad(), at::arange(1, 4, at::kFloat)));
  CHECK(at::equal(params[1].grad(), at::arange(1, 5, at::kFloat).view({2, 2})));
  CHECK(scaler.update(false));
  CHECK(scaler.growth_tracker() == 1);
  CHECK(scaler.skipped_steps() == 0);
  CHECK(scaler.scale() == 1024.0);
}

TEST_CASE("loss scaler: an injected inf gradient skips the step and backs the scale off", "[scaler]") {
  GradScaler scaler(fp16_options());
  scaler.update(false);  // a streak to lose
  auto params = parameters_with_scaled_grads(scaler.scale());
  params[1].mutable_grad()[1][0] = std::numeric_limits<float>::infinity();
  CHECK(scaler.unscale_and_check(params));
  CHECK_FALSE(scaler.update(true));
  CHECK(scaler.scale() == 512.0);
  CHECK(scaler.growth_tracker() == 0);
  CHECK(scaler.skipped_steps() == 1);
}

TEST_CASE("loss scaler: an injected nan gradient (in the first tensor, or -inf) is found too", "[scaler]") {
  GradScaler scaler(fp16_options());
  auto params = parameters_with_scaled_grads(scaler.scale());
  params[0].mutable_grad()[2] = std::numeric_limits<float>::quiet_NaN();
  CHECK(scaler.unscale_and_check(params));
  auto negative = parameters_with_scaled_grads(scaler.scale());
  negative[1].mutable_grad()[0][1] = -std::numeric_limits<float>::infinity();
  CHECK(scaler.unscale_and_check(negative));
  // Two skipped steps in a row back off twice.
  CHECK_FALSE(scaler.update(true));
  CHECK_FALSE(scaler.update(true));
  CHECK(scaler.scale() == 256.0);
  CHECK(scaler.skipped_steps() == 2);
}

TEST_CASE("loss scaler: the scale grows after growth_interval finite steps in a row, and an inf restarts the streak",
          "[scaler]") {
  GradScaler scaler(fp16_options(1024.0, 3));
  CHECK(scaler.update(false));
  CHECK(scaler.update(false));
  CHECK(scaler.scale() == 1024.0);
  CHECK(scaler.update(false));  // third finite step: growth
  CHECK(scaler.scale() == 2048.0);
  CHECK(scaler.growth_tracker() == 0);
  CHECK(scaler.update(false));
  CHECK(scaler.update(false));
  CHECK_FALSE(scaler.update(true));  // the streak of 2 is lost
  CHECK(scaler.scale() == 1024.0);
  CHECK(scaler.update(false));
  CHECK(scaler.update(false));
  CHECK(scaler.scale() == 1024.0);
  CHECK(scaler.update(false));
  CHECK(scaler.scale() == 2048.0);
}

TEST_CASE("loss scaler: the scale never grows into inf", "[scaler]") {
  GradScalerOptions options = fp16_options(1e308, 1);
  options.growth_factor = 10.0;
  GradScaler scaler(options);
  CHECK(scaler.update(false));
  CHECK(scaler.scale() == 1e308);
}

TEST_CASE("loss scaler: disabled (fp32, bf16) it scales by 1, touches nothing and takes every step", "[scaler]") {
  GradScaler scaler(GradScalerOptions{});
  CHECK(scaler.scale() == 1.0);
  auto params = parameters_with_scaled_grads(1.0);
  params[0].mutable_grad()[0] = std::numeric_limits<float>::infinity();
  CHECK_FALSE(scaler.unscale_and_check(params));
  CHECK(std::isinf(params[0].grad()[0].item<float>()));
  CHECK(params[0].grad()[1].item<float>() == 2.0f);
  CHECK(scaler.update(true));
  CHECK(scaler.skipped_steps() == 0);
}

TEST_CASE("loss scaler: parameters without a gradient are left alone", "[scaler]") {
  GradScaler scaler(fp16_options());
  std::vector<at::Tensor> params{at::zeros({2}, at::requires_grad())};
  CHECK_FALSE(scaler.unscale_and_check(params));
  CHECK_FALSE(params[0].grad().defined());
}

TEST_CASE("loss scaler: out-of-range options are usage errors naming the key", "[scaler]") {
  GradScalerOptions bad = fp16_options();
  bad.init_scale = 0;
  CHECK_THROWS_WITH(GradScaler(bad), Catch::Contains("train.loss_scale_init"));
  bad = fp16_options();
  bad.backoff_factor = 1.5;
  CHECK_THROWS_WITH(GradScaler(bad), Catch::Contains("train.loss_scale_backoff_factor"));
  bad = fp16_options();
  bad.growth_interval = 0;
  CHECK_THROWS_AS(GradScaler(bad), UsageError);
}

TEST_CASE("loss scaler: state round trip, a lookup without it keeps the initial scale, a damaged one is refused",
          "[scaler]") {
  GradScaler trained(fp16_options(1024.0, 5));
  trained.update(true);
  trained.update(false);
  trained.update(false);
  NamedTensors state = trained.state();
  std::vector<TensorView> views;
  for (const auto& [name, tensor] : state) {
    views.push_back(TensorView{name, dtype_name(tensor.scalar_type()), tensor.sizes().vec(), tensor.data_ptr(),
                               static_cast<size_t>(tensor.nbytes())});
  }
  GradScaler restored(fp16_options(1024.0, 5));
  restored.restore(TensorViewMap(views));
  CHECK(restored.scale() == 512.0);
  CHECK(restored.growth_tracker() == 2);
  CHECK(restored.skipped_steps() == 1);

  GradScaler fresh(fp16_options(4096.0, 5));
  fresh.restore(TensorViewMap({}));
  CHECK(fresh.scale() == 4096.0);

  std::vector<TensorView> damaged = views;
  damaged[1].dtype = "F32";
  GradScaler refusing(fp16_options());
  CHECK_THROWS_WITH(refusing.restore(TensorViewMap(damaged)), Catch::Contains("scaler/growth_tracker"));
  CHECK(refusing.scale() == 1024.0);  // nothing changed
}

TEST_CASE("loss scaler: its state is written into a real checkpoint and comes back on resume", "[scaler][checkpoint]") {
  test::TempDir dir;
  Config config;
  config.checkpoint.dir = dir.path();
  config.checkpoint.async = false;
  config.model.type = ModelType::Mlp;
  config.model.hidden_sizes = {8};
  config.optim.name = OptimizerName::Sgd;
  WorkerIdentity id;
  auto comm = connect_communicator(id, config.ddp, "gloo");  // world size 1
  const ModelInput input{{1, 4, 4}, 3};

  auto run = [&](bool with_scaler, GradScaler& scaler, bool save) -> std::optional<TrainPosition> {
    torch::manual_seed(1);
    auto model = build_model(config.model, input);
    std::vector<at::Tensor> params;
    for (auto& [name, p] : model->named_parameters()) params.push_back(p);
    auto optimizer = make_optimizer(config.optim, params, 0.1);
    CheckpointContent content(config, "config", *comm, *model, *optimizer);
    if (with_scaler) content.attach_grad_scaler(&scaler);
    Checkpointer checkpoints(config, content, *comm);
    MemorySnapshots memory(config.checkpoint, content, *comm);
    auto resumed = checkpoints.resume(memory, memory.survey());
    if (save) {
      checkpoints.save(TrainPosition{7, 0, 0}, "test", nullptr);
      checkpoints.wait_for_writes();
    }
    return resumed;
  };

  // An fp32 run's checkpoint (no scaler state): an fp16 run resumes from it with the initial scale.
  GradScaler unused(GradScalerOptions{});
  run(false, unused, true);
  GradScaler initial(fp16_options(2048.0, 10));
  REQUIRE(run(true, initial, false).has_value());
  CHECK(initial.scale() == 2048.0);
  CHECK(initial.skipped_steps() == 0);

  // An fp16 run that skipped a step and grew its streak saves; the next run resumes with that state.
  GradScaler saved(fp16_options(2048.0, 10));
  saved.update(true);
  saved.update(false);
  saved.update(false);
  saved.update(false);
  run(true, saved, true);
  GradScaler resumed(fp16_options(2048.0, 10));
  REQUIRE(run(true, resumed, false).has_value());
  CHECK(resumed.scale() == 1024.0);
  CHECK(resumed.growth_tracker() == 3);
  CHECK(resumed.skipped_steps() == 1);
}
