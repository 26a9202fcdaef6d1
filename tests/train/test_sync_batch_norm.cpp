// SyncBatchNorm (ddp.sync_batch_norm): the autograd function against at::batch_norm and finite differences in a world
// of 1; the model conversion (same tensors and names, world 1 bit-identical to BatchNorm); real ranks (ddp_test_worker
// --sync-bn): world 2 x batch B equals world 1 x batch 2B on the cnn (outputs, input and parameter gradients, running
// statistics), uneven batches, identical statistics on every rank, evaluation without communication, and no match
// without synchronisation; and the trainer end to end under `mgtrain launch --nproc 2`.
#include "catch_with_torch.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <regex>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "config/config.hpp"
#include "contract/worker_identity.hpp"
#include "host/port_probe.hpp"
#include "process/run_capture.hpp"
#include "rank_processes.hpp"
#include "support/summary_line.hpp"
#include "train/models/layer_model.hpp"
#include "train/models/model.hpp"
#include "train/parallel/communicator.hpp"
#include "train/parallel/sync_batch_norm.hpp"
#include "train_test_support.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using mgtrain::test::RankRuns;
using mgtrain::test::run_ranks;
using mgtrain::testing::summary_number;
namespace fs = std::filesystem;

namespace {

const std::string kBin = MGTRAIN_BIN_DIR;

std::unique_ptr<Communicator> world_of_one() {
  WorkerIdentity id;
  id.world_size = 1;
  return connect_communicator(id, DdpConfig{}, "gloo");
}

double max_difference(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Outputs and gradients (input, weight, bias) of `forward` for the loss sum(y * r).
struct Pass {
  at::Tensor output, grad_input, grad_weight, grad_bias;
};

template <typename Forward>
Pass run_pass(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& r,
              Forward forward) {
  at::Tensor x = input.clone().requires_grad_(true);
  at::Tensor w = weight.defined() ? weight.clone().requires_grad_(true) : at::Tensor();
  at::Tensor b = bias.defined() ? bias.clone().requires_grad_(true) : at::Tensor();
  at::Tensor y = forward(x, w, b);
  (y * r).sum().backward();
  return {y.detach(), x.grad(), w.defined() ? w.grad() : at::Tensor(), b.defined() ? b.grad() : at::Tensor()};
}

ModelConfig cnn_config() {
  ModelConfig c;
  c.type = ModelType::Cnn;
  c.channels = {4, 6};
  c.batch_norm = true;
  c.fc_sizes = {12};
  return c;
}

// --- real ranks ---

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::vector<float> values;
  float v;
  while (in.read(reinterpret_cast<char*>(&v), sizeof v)) values.push_back(v);
  REQUIRE_FALSE(values.empty());
  return values;
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

// One --sync-bn run: each rank's files by kind ("outputs", ...), concatenated in rank order for per-row kinds.
struct SyncRun {
  std::vector<std::map<std::string, std::vector<float>>> ranks;
  std::string rank0_out;
  std::vector<float> joined(const std::string& kind) const {
    std::vector<float> all;
    for (const auto& r : ranks) all.insert(all.end(), r.at(kind).begin(), r.at(kind).end());
    return all;
  }
};

SyncRun run_sync_check(const test::TempDir& dir, const std::string& name, int world, const std::string& rows,
                       bool sync = true, const std::map<std::string, std::string>& env = {}) {
  const std::string prefix = dir / name;
  std::vector<std::string> args = {prefix, "--sync-bn", "--rows", rows};
  if (!sync) args.push_back("--no-sync");
  RankRuns runs = run_ranks(world, args, env, 90);
  INFO(runs.errors());
  REQUIRE(runs.all_ok());
  SyncRun result;
  result.rank0_out = runs.ranks[0].out;
  for (int r = 0; r < world; ++r) {
    std::map<std::string, std::vector<float>> files;
    for (const char* kind : {"outputs", "input_grads", "param_grads", "buffers", "eval"})
      files[kind] = read_floats(prefix + ".r" + std::to_string(r) + "." + kind);
    result.ranks.push_back(std::move(files));
  }
  return result;
}

void require_same_as_world_one(const SyncRun& world2, const SyncRun& world1) {
  CHECK(max_difference(world2.joined("outputs"), world1.ranks[0].at("outputs")) < 1e-5);
  CHECK(max_difference(world2.joined("input_grads"), world1.ranks[0].at("input_grads")) < 1e-5);
  // Evaluation outputs run into the thousands (after 3 steps the running statistics, momentum 0.1, are still near
  // their initial 0 and 1, so they do not normalise yet): compared relative to their size.
  const std::vector<float>& eval1 = world1.ranks[0].at("eval");
  double eval_scale = 1.0;
  for (float v : eval1) eval_scale = std::max(eval_scale, std::abs(static_cast<double>(v)));
  CHECK(max_difference(world2.joined("eval"), eval1) < 1e-5 * eval_scale);
  for (const auto& rank : world2.ranks) {
    CHECK(max_difference(rank.at("param_grads"), world1.ranks[0].at("param_grads")) < 1e-5);
    CHECK(max_difference(rank.at("buffers"), world1.ranks[0].at("buffers")) < 1e-5);
  }
  // Running statistics (and the counters) are bit-identical on every rank: no broadcast needed.
  CHECK(world2.ranks[0].at("buffers") == world2.ranks[1].at("buffers"));
}

}  // namespace

TEST_CASE("sync batch norm: in a world of 1 the autograd function equals at::batch_norm, forward and backward",
          "[syncbn]") {
  auto comm = world_of_one();
  torch::manual_seed(3);
  for (auto dtype : {at::kFloat, at::kDouble}) {
    const double tolerance = dtype == at::kFloat ? 1e-5 : 1e-12;
    const at::Tensor input = (at::randn({6, 3, 4, 5}) * 3 + 1.5).to(dtype);
    const at::Tensor weight = at::randn({3}).to(dtype), bias = at::randn({3}).to(dtype);
    const at::Tensor r = at::randn({6, 3, 4, 5}).to(dtype);
    at::Tensor mean_ref = at::randn({3}).to(dtype), var_ref = at::rand({3}).to(dtype) + 0.5;
    at::Tensor mean_sync = mean_ref.clone(), var_sync = var_ref.clone();

    Pass ref = run_pass(input, weight, bias, r, [&](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
      return at::batch_norm(x, w, b, mean_ref, var_ref, /*training=*/true, 0.1, 1e-5, true);
    });
    Pass sync = run_pass(input, weight, bias, r, [&](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
      return sync_batch_norm_training(x, w, b, mean_sync, var_sync, 0.1, 1e-5, *comm);
    });
    CHECK(max_difference(sync.output, ref.output) < tolerance);
    CHECK(max_difference(sync.grad_input, ref.grad_input) < tolerance);
    CHECK(max_difference(sync.grad_weight, ref.grad_weight) < tolerance);
    CHECK(max_difference(sync.grad_bias, ref.grad_bias) < tolerance);
    CHECK(max_difference(mean_sync, mean_ref) < tolerance);
    CHECK(max_difference(var_sync, var_ref) < tolerance);  // unbiased variance, momentum 0.1
  }
}

TEST_CASE("sync batch norm: without affine and running statistics, and 2-D input, it equals at::batch_norm",
          "[syncbn]") {
  auto comm = world_of_one();
  torch::manual_seed(4);
  for (const auto& shape : {std::vector<int64_t>{10, 4}, std::vector<int64_t>{3, 2, 7}}) {
    const at::Tensor input = at::randn(shape, at::kDouble) * 2 - 1;
    const at::Tensor r = at::randn(shape, at::kDouble);
    Pass ref = run_pass(input, {}, {}, r, [&](const at::Tensor& x, const at::Tensor&, const at::Tensor&) {
      return at::batch_norm(x, {}, {}, {}, {}, true, 0.1, 1e-3, true);
    });
    Pass sync = run_pass(input, {}, {}, r, [&](const at::Tensor& x, const at::Tensor&, const at::Tensor&) {
      return sync_batch_norm_training(x, {}, {}, {}, {}, 0.1, 1e-3, *comm);
    });
    CHECK(max_difference(sync.output, ref.output) < 1e-12);
    CHECK(max_difference(sync.grad_input, ref.grad_input) < 1e-12);
  }
}

TEST_CASE("sync batch norm: the backward matches central finite differences", "[syncbn]") {
  auto comm = world_of_one();
  torch::manual_seed(5);
  const at::Tensor input = at::randn({3, 2, 2, 2}, at::kDouble) * 1.5 + 0.7;
  const at::Tensor weight = at::randn({2}, at::kDouble), bias = at::randn({2}, at::kDouble);
  const at::Tensor r = at::randn({3, 2, 2, 2}, at::kDouble);
  auto loss_of = [&](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    at::NoGradGuard no_grad;
    return (sync_batch_norm_training(x, w, b, {}, {}, 0.1, 1e-5, *comm) * r).sum().item<double>();
  };
  Pass analytic = run_pass(input, weight, bias, r, [&](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return sync_batch_norm_training(x, w, b, {}, {}, 0.1, 1e-5, *comm);
  });
  const double h = 1e-6;
  auto numeric = [&](int which) {
    at::Tensor base[3] = {input.clone(), weight.clone(), bias.clone()};
    at::Tensor grad = at::zeros_like(base[which]);
    auto flat = base[which].view({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double keep = flat[i].item<double>();
      flat[i].fill_(keep + h);
      const double up = loss_of(base[0], base[1], base[2]);
      flat[i].fill_(keep - h);
      const double down = loss_of(base[0], base[1], base[2]);
      flat[i].fill_(keep);
      grad.view({-1})[i].fill_((up - down) / (2 * h));
    }
    return grad;
  };
  CHECK(max_difference(analytic.grad_input, numeric(0)) < 1e-6);
  CHECK(max_difference(analytic.grad_weight, numeric(1)) < 1e-6);
  CHECK(max_difference(analytic.grad_bias, numeric(2)) < 1e-6);
}

TEST_CASE("sync batch norm: the module forward follows torch.nn.SyncBatchNorm's rules in a world of 1", "[syncbn]") {
  auto comm = world_of_one();
  torch::manual_seed(6);
  const at::Tensor input = at::randn({5, 3, 2, 2}) + 2;
  BatchNormTensors layer{
      at::ones({3}), at::zeros({3}), at::zeros({3}), at::ones({3}), at::zeros({}, at::kLong), std::nullopt, 1e-5};
  // momentum None: cumulative average; two batches give the mean of their statistics.
  sync_batch_norm_forward(input, layer, /*training=*/true, *comm);
  sync_batch_norm_forward(input * 3, layer, /*training=*/true, *comm);
  CHECK(layer.num_batches_tracked.item<int64_t>() == 2);
  const at::Tensor batch_mean = input.mean({0, 2, 3});
  CHECK(max_difference(layer.running_mean, batch_mean * 2) < 1e-5);  // (mean + 3 mean) / 2
  // Evaluation uses the running statistics and counts nothing.
  at::Tensor eval = sync_batch_norm_forward(input, layer, /*training=*/false, *comm);
  CHECK(layer.num_batches_tracked.item<int64_t>() == 2);
  CHECK(max_difference(eval, (input - layer.running_mean.view({1, 3, 1, 1})) /
                                 (layer.running_var.view({1, 3, 1, 1}) + 1e-5).sqrt()) < 1e-5);
  // One value per channel cannot be normalised (the error names the shape).
  BatchNormTensors small{at::ones({3}), at::zeros({3}), at::zeros({3}), at::ones({3}), at::zeros({}, at::kLong), 0.1,
                         1e-5};
  CHECK_THROWS_WITH(sync_batch_norm_training(at::randn({1, 3}), small.weight, small.bias, small.running_mean,
                                             small.running_var, 0.1, 1e-5, *comm),
                    Catch::Matchers::Contains("1 value(s) per channel") && Catch::Matchers::Contains("[1, 3]"));
}

TEST_CASE("sync batch norm: conversion keeps the tensors and names, and a world of 1 trains bit-identically",
          "[syncbn]") {
  auto comm = world_of_one();
  const ModelInput input{{3, 8, 8}, 5};
  torch::manual_seed(11);
  auto plain = build_model(cnn_config(), input);
  torch::manual_seed(11);
  auto synced = build_model(cnn_config(), input);
  const NamedTensors params_before = synced->named_parameters(), buffers_before = synced->named_buffers();
  REQUIRE(convert_to_sync_batch_norm(*synced, *comm) == 2);
  const NamedTensors params_after = synced->named_parameters(), buffers_after = synced->named_buffers();
  REQUIRE(params_after.size() == params_before.size());
  REQUIRE(buffers_after.size() == buffers_before.size());
  for (std::size_t i = 0; i < params_after.size(); ++i) {
    CHECK(params_after[i].first == params_before[i].first);
    CHECK(params_after[i].second.is_same(params_before[i].second));  // the optimizer's tensors
  }
  for (std::size_t i = 0; i < buffers_after.size(); ++i) CHECK(buffers_after[i].first == buffers_before[i].first);
  CHECK(buffers_after[0].first == "features.1.running_mean");

  // Two training steps and an evaluation: bit-identical to the unconverted model.
  const at::Tensor x = at::randn({6, 3, 8, 8}) + 1;
  for (int step = 0; step < 2; ++step) {
    for (Model* m : {plain.get(), synced.get()}) {
      m->train(true);
      m->forward(x).sum().backward();
      at::NoGradGuard no_grad;
      for (auto& [name, p] : m->named_parameters()) {
        p.sub_(p.grad() * 0.1);
        p.mutable_grad() = at::Tensor();
      }
    }
  }
  for (std::size_t i = 0; i < params_after.size(); ++i)
    CHECK(at::equal(plain->named_parameters()[i].second, params_after[i].second));
  for (std::size_t i = 0; i < buffers_after.size(); ++i)
    CHECK(at::equal(plain->named_buffers()[i].second, synced->named_buffers()[i].second));
  plain->train(false);
  synced->train(false);
  CHECK(at::equal(plain->forward(x), synced->forward(x)));

  CHECK(revert_sync_batch_norm(*dynamic_cast<LayerModel&>(*synced).module()) == 2);
  CHECK(revert_sync_batch_norm(*dynamic_cast<LayerModel&>(*synced).module()) == 0);
}

TEST_CASE(
    "sync batch norm: the trainer hook converts resnet, leaves models without BatchNorm and ddp.strategy dp alone",
    "[syncbn]") {
  auto comm = world_of_one();
  DdpConfig on;
  on.sync_batch_norm = true;
  ModelConfig resnet;
  resnet.type = ModelType::Resnet;
  resnet.resnet_blocks = 1;
  auto model = build_model(resnet, ModelInput{{3, 8, 8}, 10});
  CHECK(apply_sync_batch_norm(DdpConfig{}, *model, *comm) == 0);  // the key off: nothing converted
  // Stem + 3 stages x (bn1, bn2) + the 2 projection shortcuts' BatchNorms.
  CHECK(apply_sync_batch_norm(on, *model, *comm) == 9);
  ModelConfig mlp;
  mlp.type = ModelType::Mlp;
  auto no_bn = build_model(mlp, ModelInput{{1, 4, 4}, 3});
  CHECK(apply_sync_batch_norm(on, *no_bn, *comm) == 0);
  DdpConfig data_parallel = on;
  data_parallel.strategy =
      Strategy::Dp;  // one process over several GPUs: nothing to synchronise with (a warning says so)
  auto cnn = build_model(cnn_config(), ModelInput{{3, 8, 8}, 5});
  CHECK(apply_sync_batch_norm(data_parallel, *cnn, *comm) == 0);
  CHECK(sync_batch_norm_note(0).empty());
  CHECK(sync_batch_norm_note(1) == ", 1 BatchNorm layer synchronised");
  CHECK(sync_batch_norm_note(9) == ", 9 BatchNorm layers synchronised");
}

TEST_CASE("sync batch norm: world 2 x batch 8 equals world 1 x batch 16 on the cnn", "[syncbn][ddp]") {
  test::TempDir dir;
  const SyncRun world1 = run_sync_check(dir, "w1", 1, "16");
  CHECK(world1.rank0_out.find("converted 2") != std::string::npos);
  SECTION("shared-memory all-reduce") {
    const SyncRun world2 = run_sync_check(dir, "w2", 2, "8,8");
    require_same_as_world_one(world2, world1);
  }
  SECTION("Gloo all-reduce") {
    const SyncRun world2 = run_sync_check(dir, "w2gloo", 2, "8,8", true, {{"MGTRAIN_SHM_ALLREDUCE", "0"}});
    require_same_as_world_one(world2, world1);
  }
}

TEST_CASE("sync batch norm: uneven batches per rank (3 and 13) equal world 1 x batch 16", "[syncbn][ddp]") {
  test::TempDir dir;
  const SyncRun world1 = run_sync_check(dir, "w1", 1, "16");
  const SyncRun world2 = run_sync_check(dir, "w2", 2, "3,13");
  require_same_as_world_one(world2, world1);
}

TEST_CASE("sync batch norm: without synchronisation world 2 does not match world 1 (the comparison can fail)",
          "[syncbn][ddp]") {
  test::TempDir dir;
  const SyncRun world1 = run_sync_check(dir, "w1", 1, "16");
  const SyncRun world2 = run_sync_check(dir, "w2", 2, "8,8", /*sync=*/false);
  CHECK(world2.rank0_out.find("converted 0") != std::string::npos);
  CHECK(max_difference(world2.joined("outputs"), world1.ranks[0].at("outputs")) > 1e-3);
  CHECK(world2.ranks[0].at("buffers") != world2.ranks[1].at("buffers"));  // per-rank statistics drift apart
}

TEST_CASE("sync batch norm: the trainer under mgtrain launch --nproc 2 synchronises the cnn's BatchNorm layers",
          "[syncbn][launch]") {
  test::TempDir dir;
  const std::vector<std::string> job = {"model.type=cnn",
                                        "model.channels=4,8",
                                        "model.fc_sizes=16",
                                        "model.batch_norm=true",
                                        "data.dataset=synthetic",
                                        "data.input_shape=1,12,12",
                                        "data.synthetic_samples=256",
                                        "train.batch_size=16",
                                        "train.max_steps=6",
                                        "train.eval_every_steps=3",
                                        "ddp.sync_batch_norm=true",
                                        "launch.log_dir=" + dir.path()};
  std::vector<std::string> argv = {kBin + "/mgtrain", "launch", "--nproc", "2", "--run-id", "syncbn"};
  argv.insert(argv.end(), job.begin(), job.end());
  CaptureOptions options;
  options.timeout_s = 180;
  CapturedRun run = run_and_capture(argv, options);
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("[rank 0] mgtrain: cnn on 1x12x12") != std::string::npos);
  CHECK(run.out.find(", 2 BatchNorm layers synchronised | world 2") != std::string::npos);
  CHECK(summary_number(run.out, "world_size") == 2);
  CHECK(summary_number(run.out, "steps") == 6);

  // The final checkpoint of the converted model exports (same names: the export rebuilds a plain model from it).
  std::string checkpoint;
  for (const auto& entry : fs::directory_iterator(dir.path() + "/syncbn/checkpoints")) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.size() > 12 && name.rfind(".safetensors") == name.size() - 12)
      checkpoint = entry.path();
  }
  REQUIRE_FALSE(checkpoint.empty());
  CapturedRun exported = run_and_capture(
      {kBin + "/mgtrain", "export", checkpoint, "--format", "torchscript", "-o", dir / "m.pt"}, options);
  INFO(exported.out << exported.err);
  CHECK(exported.exit_code == 0);
  CHECK(exported.out.find("forward matches the model") != std::string::npos);

  // The same key on a model without BatchNorm: one warning (rank 0's), training goes on.
  std::vector<std::string> mlp = {kBin + "/mgtrain",
                                  "launch",
                                  "--nproc",
                                  "2",
                                  "--run-id",
                                  "syncbn-mlp",
                                  "model.type=mlp",
                                  "model.hidden_sizes=8",
                                  "data.dataset=synthetic",
                                  "data.input_shape=1,4,4",
                                  "data.synthetic_samples=64",
                                  "train.batch_size=8",
                                  "train.max_steps=2",
                                  "ddp.sync_batch_norm=true",
                                  "launch.log_dir=" + dir.path()};
  CapturedRun warned = run_and_capture(mlp, options);
  INFO(warned.out << warned.err);
  REQUIRE(warned.exit_code == 0);
  const std::string all = warned.out + warned.err;
  const std::string warning = "warning: ddp.sync_batch_norm is true, but the model";
  const auto first = all.find(warning);
  CHECK(first != std::string::npos);
  CHECK(all.find(warning, first + 1) == std::string::npos);
  CHECK(warned.out.find("BatchNorm layers synchronised") == std::string::npos);
}
