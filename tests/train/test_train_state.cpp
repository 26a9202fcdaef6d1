// Checkpoint state (lib/train/state/train_state): capturing model + optimizer state, the one-buffer snapshot, restoring
// into a freshly built model and optimizer with bit-identical continuation (sgd, nesterov, adam, adamw, amsgrad,
// dropout with the RNG state, BatchNorm buffers), and the mismatch errors.
#include "catch_with_torch.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include "train/loop/optimizer_factory.hpp"
#include "train/models/model.hpp"
#include "train/state/train_state.hpp"
#include "train/torch/torch_compat.hpp"
#include "util/error.hpp"

using Catch::Matchers::Contains;
using mgtrain::Model;
using mgtrain::NamedTensors;
using mgtrain::StateSnapshot;
using mgtrain::TensorView;
using mgtrain::TensorViewMap;

namespace {

const mgtrain::ModelInput kInput{{1, 4, 4}, 3};

mgtrain::ModelConfig mlp_config(std::vector<int64_t> hidden = {16, 8}, double dropout = 0.0) {
  mgtrain::ModelConfig c;
  c.type = mgtrain::ModelType::Mlp;
  c.hidden_sizes = std::move(hidden);
  c.dropout = dropout;
  return c;
}

mgtrain::ModelConfig cnn_config() {
  mgtrain::ModelConfig c;
  c.type = mgtrain::ModelType::Cnn;
  c.channels = {4};
  c.fc_sizes = {8};
  c.batch_norm = true;
  return c;
}

std::unique_ptr<Model> build(const mgtrain::ModelConfig& config, uint64_t seed) {
  torch::manual_seed(seed);
  auto model = mgtrain::build_model(config, kInput);
  model->train(true);
  return model;
}

std::vector<at::Tensor> parameters_of(Model& model) {
  std::vector<at::Tensor> out;
  for (auto& [name, p] : model.named_parameters()) out.push_back(p);
  return out;
}

// How the optimizer under test is built: through make_optimizer (the trainer's path) or directly for amsgrad, which
// the config does not expose.
struct OptimizerRecipe {
  std::string label;
  std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)> make;
};

OptimizerRecipe from_config(const std::string& name, double momentum = 0.9, bool nesterov = false) {
  mgtrain::OptimConfig c;
  c.name = *mgtrain::parse_enum<mgtrain::OptimizerName>(name);
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = 1e-3;
  return {name + (nesterov ? " nesterov" : "") + (name == "sgd" ? " momentum " + std::to_string(momentum) : ""),
          [c](std::vector<at::Tensor> params) { return mgtrain::make_optimizer(c, std::move(params), 0.05); }};
}

OptimizerRecipe amsgrad(bool adamw) {
  if (adamw) {
    return {"adamw amsgrad", [](std::vector<at::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
              return std::make_unique<torch::optim::AdamW>(std::move(params),
                                                           torch::optim::AdamWOptions(0.01).amsgrad(true));
            }};
  }
  return {"adam amsgrad", [](std::vector<at::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
            return std::make_unique<torch::optim::Adam>(std::move(params),
                                                        torch::optim::AdamOptions(0.01).amsgrad(true));
          }};
}

using Batches = std::vector<std::pair<at::Tensor, at::Tensor>>;

Batches make_batches(int n) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(1234);
  Batches batches;
  for (int i = 0; i < n; ++i) {
    batches.emplace_back(at::randn({6, 1, 4, 4}, g), at::randint(0, 3, {6}, g, at::TensorOptions().dtype(at::kLong)));
  }
  return batches;
}

void train(Model& model, torch::optim::Optimizer& optimizer, const Batches& batches, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    optimizer.zero_grad();
    model.loss(model.forward(batches[i].first), batches[i].second).backward();
    optimizer.step();
  }
}

bool same_tensors(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || a[i].second.scalar_type() != b[i].second.scalar_type() ||
        !at::equal(a[i].second, b[i].second)) {
      return false;
    }
  }
  return true;
}

NamedTensors with_rng(NamedTensors state) {
  for (auto& entry : mgtrain::capture_rng_state()) state.push_back(std::move(entry));
  return state;
}

std::vector<std::string> names_of(const NamedTensors& named) {
  std::vector<std::string> names;
  for (const auto& [name, t] : named) names.push_back(name);
  return names;
}

// The snapshot's views, optionally edited, as a lookup.
TensorViewMap lookup(const StateSnapshot& snapshot, const std::function<void(std::vector<TensorView>&)>& edit = {}) {
  auto views = snapshot.views();
  if (edit) edit(views);
  return TensorViewMap(std::move(views));
}

std::string restore_error(Model& model, torch::optim::Optimizer& optimizer, const TensorViewMap& stored) {
  try {
    mgtrain::restore_train_state(model, optimizer, stored);
  } catch (const mgtrain::UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// Trains `steps_before` steps, snapshots, trains on; builds a fresh model (another init seed) and optimizer, restores,
// trains the same further steps; the two must end bit-identical, and so must their optimizer states.
void check_resume_is_bit_identical(const mgtrain::ModelConfig& config, const OptimizerRecipe& recipe, int steps_before,
                                   int steps_after) {
  INFO(recipe.label << ", " << steps_before << " steps before the snapshot");
  const Batches batches = make_batches(steps_before + steps_after);
  auto a = build(config, 1);
  auto optimizer_a = recipe.make(parameters_of(*a));
  train(*a, *optimizer_a, batches, 0, steps_before);
  StateSnapshot snapshot;
  snapshot.take(with_rng(mgtrain::capture_train_state(*a, *optimizer_a)));
  train(*a, *optimizer_a, batches, steps_before, batches.size());

  auto b = build(config, 99);
  auto optimizer_b = recipe.make(parameters_of(*b));
  REQUIRE_FALSE(same_tensors(a->named_parameters(), b->named_parameters()));
  const TensorViewMap stored = lookup(snapshot);
  mgtrain::restore_train_state(*b, *optimizer_b, stored);
  mgtrain::restore_rng_state(stored);
  train(*b, *optimizer_b, batches, steps_before, batches.size());

  CHECK(same_tensors(a->named_parameters(), b->named_parameters()));
  CHECK(same_tensors(a->named_buffers(), b->named_buffers()));
  CHECK(same_tensors(mgtrain::capture_train_state(*a, *optimizer_a), mgtrain::capture_train_state(*b, *optimizer_b)));
}

}  // namespace

TEST_CASE("train state: names and contents of the capture, per optimizer") {
  auto model = build(mlp_config(), 1);
  const Batches batches = make_batches(3);
  const std::vector<std::string> model_names = {"model/1.weight", "model/1.bias",   "model/3.weight",
                                                "model/3.bias",   "model/5.weight", "model/5.bias"};

  auto sgd = mgtrain::make_optimizer(mgtrain::OptimConfig{}, parameters_of(*model), 0.1);  // sgd, momentum 0.9
  CHECK(names_of(mgtrain::capture_train_state(*model, *sgd)) == model_names);  // no step yet: no optimizer state
  train(*model, *sgd, batches, 0, 1);
  auto state = mgtrain::capture_train_state(*model, *sgd);
  REQUIRE(state.size() == 12);
  CHECK(state[6].first == "optim/1.weight/momentum_buffer");
  CHECK(state[11].first == "optim/5.bias/momentum_buffer");
  CHECK(state[0].second.unsafeGetTensorImpl() == model->named_parameters()[0].second.unsafeGetTensorImpl());  // live

  // The state map's key helper finds every parameter (1.13: string of the TensorImpl pointer; 2.x: the pointer).
  for (const auto& p : parameters_of(*model))
    CHECK(sgd->state().count(mgtrain::torch_compat::optimizer_state_key(sgd->state(), p)) == 1);

  for (const std::string name : {"adam", "adamw"}) {
    auto optimizer = from_config(name).make(parameters_of(*model));
    train(*model, *optimizer, batches, 0, 3);
    state = mgtrain::capture_train_state(*model, *optimizer);
    REQUIRE(state.size() == 6 + 6 * 3);
    CHECK(state[6].first == "optim/1.weight/step");
    CHECK(state[7].first == "optim/1.weight/exp_avg");
    CHECK(state[8].first == "optim/1.weight/exp_avg_sq");
    // LibTorch keeps Adam's step count as an int64_t per parameter: stored as a 0-dim I64 tensor.
    CHECK(state[6].second.dim() == 0);
    CHECK(state[6].second.scalar_type() == at::kLong);
    CHECK(state[6].second.item<int64_t>() == 3);
  }
  auto with_amsgrad = amsgrad(false).make(parameters_of(*model));
  train(*model, *with_amsgrad, batches, 0, 1);
  state = mgtrain::capture_train_state(*model, *with_amsgrad);
  REQUIRE(state.size() == 6 + 6 * 4);
  CHECK(state[9].first == "optim/1.weight/max_exp_avg_sq");

  // SGD without momentum keeps no state.
  auto plain = from_config("sgd", 0.0).make(parameters_of(*model));
  train(*model, *plain, batches, 0, 2);
  CHECK(names_of(mgtrain::capture_train_state(*model, *plain)) == model_names);
}

TEST_CASE("train state: resume continues bit-identically for sgd (momentum, nesterov), adam, adamw, amsgrad") {
  for (const auto& recipe : {from_config("sgd"), from_config("sgd", 0.9, true), from_config("sgd", 0.0),
                             from_config("adam"), from_config("adamw"), amsgrad(false), amsgrad(true)}) {
    check_resume_is_bit_identical(mlp_config(), recipe, 3, 4);
  }
}

TEST_CASE("train state: the optimizer state matters (restoring only the model diverges)") {
  const Batches batches = make_batches(5);
  for (const auto& recipe : {from_config("sgd"), from_config("adam")}) {
    INFO(recipe.label);
    auto a = build(mlp_config(), 1);
    auto optimizer_a = recipe.make(parameters_of(*a));
    train(*a, *optimizer_a, batches, 0, 3);
    StateSnapshot snapshot;
    snapshot.take(mgtrain::capture_train_state(*a, *optimizer_a));
    train(*a, *optimizer_a, batches, 3, 5);

    // Drop the optim/ entries: the model is restored, the optimizer starts afresh.
    auto b = build(mlp_config(), 99);
    auto optimizer_b = recipe.make(parameters_of(*b));
    mgtrain::restore_train_state(*b, *optimizer_b, lookup(snapshot, [](std::vector<TensorView>& views) {
      views.erase(std::remove_if(views.begin(), views.end(),
                                 [](const TensorView& v) { return v.name.rfind("optim/", 0) == 0; }),
                  views.end());
    }));
    train(*b, *optimizer_b, batches, 3, 5);
    CHECK_FALSE(same_tensors(a->named_parameters(), b->named_parameters()));
  }
}

TEST_CASE("train state: BatchNorm buffers (running statistics, I64 counter) are restored") {
  check_resume_is_bit_identical(cnn_config(), from_config("sgd"), 2, 3);
  auto model = build(cnn_config(), 1);
  auto optimizer = from_config("adam").make(parameters_of(*model));
  train(*model, *optimizer, make_batches(2), 0, 2);
  const auto state = mgtrain::capture_train_state(*model, *optimizer);
  bool counter = false;
  for (const auto& [name, t] : state) {
    if (name == "model/features.1.num_batches_tracked") {
      counter = true;
      CHECK(t.scalar_type() == at::kLong);
      CHECK(t.item<int64_t>() == 2);
    }
  }
  CHECK(counter);
}

TEST_CASE("train state: dropout continues identically when the RNG state is restored too") {
  const auto config = mlp_config({16, 8}, 0.5);
  check_resume_is_bit_identical(config, from_config("adam"), 2, 3);

  // Outputs in training mode (dropout active) after the restore equal the uninterrupted run's.
  const Batches batches = make_batches(1);
  auto a = build(config, 1);
  auto optimizer_a = from_config("sgd").make(parameters_of(*a));
  train(*a, *optimizer_a, batches, 0, 1);
  StateSnapshot snapshot;
  snapshot.take(with_rng(mgtrain::capture_train_state(*a, *optimizer_a)));
  const at::Tensor out_a = a->forward(batches[0].first).detach();
  auto b = build(config, 99);
  auto optimizer_b = from_config("sgd").make(parameters_of(*b));
  const TensorViewMap stored = lookup(snapshot);
  mgtrain::restore_train_state(*b, *optimizer_b, stored);
  CHECK_FALSE(at::equal(b->forward(batches[0].first).detach(), out_a));  // another dropout mask
  mgtrain::restore_rng_state(stored);
  CHECK(at::equal(b->forward(batches[0].first).detach(), out_a));
}

TEST_CASE("train state: restore into an optimizer that never stepped, and a stateless checkpoint into one that did") {
  const Batches batches = make_batches(4);
  // Checkpoint taken before any step (no optim entries) restored into a model+optimizer that trained: its optimizer
  // state is dropped, and it continues exactly like a fresh run.
  auto fresh = build(mlp_config(), 1);
  auto optimizer_fresh = from_config("adam").make(parameters_of(*fresh));
  StateSnapshot snapshot;
  snapshot.take(mgtrain::capture_train_state(*fresh, *optimizer_fresh));
  auto trained = build(mlp_config(), 5);
  auto optimizer_trained = from_config("adam").make(parameters_of(*trained));
  train(*trained, *optimizer_trained, batches, 0, 2);
  mgtrain::restore_train_state(*trained, *optimizer_trained, lookup(snapshot));
  CHECK(optimizer_trained->state().empty());
  train(*fresh, *optimizer_fresh, batches, 0, 4);
  train(*trained, *optimizer_trained, batches, 0, 4);
  CHECK(same_tensors(fresh->named_parameters(), trained->named_parameters()));
}

TEST_CASE("train state: mismatches are refused, naming the first mismatching tensor, and change nothing") {
  auto a = build(mlp_config(), 1);
  auto adam = from_config("adam").make(parameters_of(*a));
  train(*a, *adam, make_batches(1), 0, 1);
  StateSnapshot snapshot;
  snapshot.take(mgtrain::capture_train_state(*a, *adam));

  auto b = build(mlp_config(), 2);
  auto optimizer_b = from_config("adam").make(parameters_of(*b));
  const auto before = mgtrain::capture_train_state(*b, *optimizer_b);
  auto unchanged = [&] {
    CHECK(same_tensors(b->named_parameters(), build(mlp_config(), 2)->named_parameters()));
    CHECK(optimizer_b->state().empty());
  };

  SECTION("a tensor the model has but the checkpoint lacks") {
    const auto stored = lookup(snapshot, [](std::vector<TensorView>& v) { v.erase(v.begin() + 3); });  // model/3.bias
    CHECK(restore_error(*b, *optimizer_b, stored) ==
          "checkpoint does not match the model: model/3.bias is in the model but not in the checkpoint (were the "
          "model: settings "
          "changed?)");
  }
  SECTION("a tensor the checkpoint has but the model lacks") {
    const auto stored = lookup(snapshot, [](std::vector<TensorView>& v) {
      TensorView extra = v[1];
      extra.name = "model/7.bias";
      v.push_back(extra);
    });
    CHECK(restore_error(*b, *optimizer_b, stored) ==
          "checkpoint does not match the model: model/7.bias is in the checkpoint but not in the model (were the "
          "model: settings "
          "changed?)");
  }
  SECTION("a shape mismatch names the first mismatching tensor in model order with both shapes") {
    auto c = build(mlp_config({12, 8}), 3);  // 1.weight, 1.bias and 3.weight all differ: 1.weight is named
    auto optimizer_c = from_config("adam").make(parameters_of(*c));
    CHECK(restore_error(*c, *optimizer_c, lookup(snapshot)) ==
          "checkpoint does not match the model: model/1.weight has shape [16, 16] in the checkpoint and [12, 16] in "
          "the model (were "
          "the model: settings changed?)");
    auto d = build(mlp_config({16, 8, 8}), 3);  // same first layers, then 5.weight [3, 8] vs [8, 8]
    auto optimizer_d = from_config("adam").make(parameters_of(*d));
    CHECK(restore_error(*d, *optimizer_d, lookup(snapshot)) ==
          "checkpoint does not match the model: model/5.weight has shape [3, 8] in the checkpoint and [8, 8] in the "
          "model (were the "
          "model: settings changed?)");
  }
  SECTION("a dtype mismatch") {
    const auto stored = lookup(snapshot, [](std::vector<TensorView>& v) { v[2].dtype = "F64"; });
    CHECK_THAT(restore_error(*b, *optimizer_b, stored),
               Contains("model/3.weight has dtype F64 in the checkpoint and F32 in the model"));
  }
  SECTION("bytes that do not fit the shape") {
    const auto stored = lookup(snapshot, [](std::vector<TensorView>& v) { v[1].nbytes -= 4; });
    CHECK_THAT(restore_error(*b, *optimizer_b, stored),
               Contains("checkpoint is inconsistent: model/1.bias holds 60 bytes"));
  }
  SECTION("an optimizer type mismatch") {
    auto sgd = from_config("sgd").make(parameters_of(*b));
    CHECK(restore_error(*b, *sgd, lookup(snapshot)) ==
          "checkpoint does not match the optimizer: optim/1.weight/exp_avg is adam/adamw state, but the optimizer is "
          "sgd (was "
          "optim.name changed?)");
    auto trained_sgd = from_config("sgd").make(parameters_of(*a));
    train(*a, *trained_sgd, make_batches(1), 0, 1);
    StateSnapshot sgd_snapshot;
    sgd_snapshot.take(mgtrain::capture_train_state(*a, *trained_sgd));
    CHECK(restore_error(*b, *optimizer_b, lookup(sgd_snapshot)) ==
          "checkpoint does not match the optimizer: optim/1.weight/momentum_buffer is sgd state, but the optimizer is "
          "adam (was "
          "optim.name changed?)");
    auto with_amsgrad = amsgrad(false).make(parameters_of(*b));
    CHECK_THAT(restore_error(*b, *with_amsgrad, lookup(snapshot)),
               Contains("optim/1.weight/max_exp_avg_sq is missing from the checkpoint") && Contains("amsgrad"));
  }
  SECTION("optimizer state of a parameter the model lacks, or partial state") {
    auto stored = lookup(snapshot, [](std::vector<TensorView>& v) {
      TensorView extra = v[6];
      extra.name = "optim/9.weight/step";
      v.push_back(extra);
    });
    CHECK_THAT(restore_error(*b, *optimizer_b, stored),
               Contains("optim/9.weight/step is in the checkpoint, but the model has no parameter 9.weight"));
    stored = lookup(snapshot, [](std::vector<TensorView>& v) { v.erase(v.begin() + 8); });  // optim/1.weight/exp_avg_sq
    CHECK_THAT(restore_error(*b, *optimizer_b, stored),
               Contains("optim/1.weight/exp_avg_sq is missing from the checkpoint"));
  }
  unchanged();
  CHECK(same_tensors(before, mgtrain::capture_train_state(*b, *optimizer_b)));
}

TEST_CASE("train state: the snapshot is one 8-byte aligned buffer equal to the tensors, reused while the size holds") {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor matrix = at::randn({3, 2}, g);
  NamedTensors tensors = {
      {"f32", at::randn({3}, g)},
      {"u8", at::randint(0, 255, {5}, g, at::TensorOptions().dtype(at::kByte))},
      {"i64", at::randint(-1000, 1000, {2, 1}, g, at::TensorOptions().dtype(at::kLong))},
      {"bool", at::randn({3}, g).gt(0)},
      {"f64 scalar", at::scalar_tensor(2.5, at::TensorOptions().dtype(at::kDouble))},
      {"transposed", matrix.t()},  // not contiguous
      {"f16", at::randn({7}, g).to(at::kHalf)},
      {"bf16", at::randn({2, 3}, g).to(at::kBFloat16)},
      {"empty", at::empty({0, 4})},
      {"i32", at::arange(0, 3, at::TensorOptions().dtype(at::kInt))},
      {"i16", at::arange(0, 3, at::TensorOptions().dtype(at::kShort))},
      {"i8", at::arange(-1, 2, at::TensorOptions().dtype(at::kChar))},
  };
  StateSnapshot snapshot;
  snapshot.take(tensors);
  REQUIRE(snapshot.entries().size() == tensors.size());
  CHECK(reinterpret_cast<uintptr_t>(snapshot.data()) % 8 == 0);
  const std::vector<std::string> dtypes = {"F32", "U8",   "I64", "BOOL", "F64", "F32",
                                           "F16", "BF16", "F32", "I32",  "I16", "I8"};
  size_t previous_end = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& entry = snapshot.entries()[i];
    const at::Tensor expected = tensors[i].second.contiguous();
    INFO(entry.name);
    CHECK(entry.name == tensors[i].first);
    CHECK(entry.dtype == dtypes[i]);
    CHECK(entry.shape == tensors[i].second.sizes().vec());
    CHECK(entry.offset % 8 == 0);
    CHECK(entry.offset >= previous_end);
    CHECK(entry.offset < previous_end + 8);
    CHECK(entry.nbytes == static_cast<size_t>(expected.numel()) * expected.element_size());
    CHECK(std::memcmp(snapshot.data() + entry.offset, expected.data_ptr(), entry.nbytes) == 0);
    for (size_t pad = previous_end; pad < entry.offset; ++pad) CHECK(snapshot.data()[pad] == 0);
    previous_end = entry.offset + entry.nbytes;
  }
  CHECK(snapshot.size() == previous_end);
  const auto views = snapshot.views();
  CHECK(views[2].data == snapshot.data() + snapshot.entries()[2].offset);
  CHECK(mgtrain::scalar_type_of(views[7].dtype) == at::kBFloat16);

  // A copy: changing the tensors does not change the snapshot, until the next take(), which reuses the buffer.
  const std::vector<uint8_t> first(snapshot.data(), snapshot.data() + snapshot.size());
  const uint8_t* buffer = snapshot.data();
  tensors[0].second.add_(1);
  CHECK(std::memcmp(snapshot.data(), first.data(), first.size()) == 0);
  snapshot.take(tensors);
  CHECK(snapshot.allocations() == 1);
  CHECK(snapshot.data() == buffer);
  CHECK(std::memcmp(snapshot.data(), first.data(), first.size()) != 0);
  CHECK(std::memcmp(snapshot.data() + snapshot.entries()[0].offset, tensors[0].second.data_ptr(), 12) == 0);
  tensors.emplace_back("more", at::zeros({3}));
  snapshot.take(tensors);
  CHECK(snapshot.allocations() == 2);

  // Unsupported dtypes are refused by name.
  CHECK_THROWS_AS(snapshot.take({{"complex", at::zeros({2}, at::TensorOptions().dtype(at::kComplexFloat))}}),
                  mgtrain::Error);
}

TEST_CASE("train state: the CPU generator's state round-trips, and a missing or malformed one is refused") {
  const NamedTensors rng = mgtrain::capture_rng_state();
  REQUIRE(!rng.empty());
  CHECK(rng[0].first == "rng/cpu");
  CHECK(rng[0].second.scalar_type() == at::kByte);
  CHECK(rng[0].second.dim() == 1);
  StateSnapshot snapshot;
  snapshot.take(rng);
  const at::Tensor first = at::randn({8});
  at::randn({100});
  mgtrain::restore_rng_state(lookup(snapshot));
  CHECK(at::equal(at::randn({8}), first));

  // With a per-rank prefix.
  std::vector<TensorView> prefixed = snapshot.views();
  for (auto& v : prefixed) v.name = "rank1/" + v.name;
  mgtrain::restore_rng_state(TensorViewMap(prefixed), "rank1/");
  CHECK(at::equal(at::randn({8}), first));

  CHECK_THROWS_WITH(mgtrain::restore_rng_state(TensorViewMap(std::vector<TensorView>{})),
                    Contains("rng/cpu (the CPU random generator's state) is missing"));
  std::vector<TensorView> short_state = snapshot.views();
  short_state[0].shape = {16};
  short_state[0].nbytes = 16;
  CHECK_THROWS_AS(mgtrain::restore_rng_state(TensorViewMap(short_state)), mgtrain::UsageError);
}
