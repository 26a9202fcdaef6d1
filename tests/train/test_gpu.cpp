// The GPU path. Without a GPU (or with a CPU-only LibTorch): the device choice and its fallback, explicit nccl and
// cuda refused, ddp.strategy dp refused, and DataParallel's replication itself on CPU devices (the gradients of the
// replicas reach the master). Tagged [gpu] (skipped with a message when no GPU is visible): device binding,
// the allocator cap, pinned batches, fp16/bf16 training with the worker, NCCL with two GPUs, dp over two GPUs.
#include "train/catch_with_torch.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include "config/config.hpp"
#include "contract/worker_identity.hpp"
#include "process/run_capture.hpp"
#include "support/temp_dir.hpp"
#include "train/data/batch_loader.hpp"
#include "train/data/data_source.hpp"
#include "train/loop/mixed_precision.hpp"
#include "train/models/model.hpp"
#include "train/parallel/data_parallel.hpp"
#include "train/parallel/device_setup.hpp"
#include "train/torch/torch_compat.hpp"
#include "util/error.hpp"

using namespace mgtrain;

namespace {

// The binaries under test: this build's, or MGTRAIN_TEST_BIN_DIR's when set (the GPU bundle of scripts/device/pack.sh
// runs this test binary away from its build tree).
std::string bin_dir() {
  const char* dir = std::getenv("MGTRAIN_TEST_BIN_DIR");
  return dir != nullptr && *dir != '\0' ? dir : MGTRAIN_BIN_DIR;
}
const std::string kBin = bin_dir();
const c10::Device kCpu(c10::kCPU);

bool have_gpu() { return torch::cuda::is_available(); }

// For [gpu] tests: true when they can run; otherwise prints why not.
bool gpu_or_skip(int needed = 1) {
  const int count = have_gpu() ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (count >= needed) return true;
  WARN("skipped: needs " << needed << " GPU(s), this process sees " << count
                         << (have_gpu() ? "" : " (no GPU, or a CPU-only LibTorch; see scripts/build-cuda.sh)"));
  return false;
}

CapturedRun run_worker(const std::vector<std::string>& settings, const std::string& name) {
  const testing::TempDir temp_dir("mgtrain-gpu-" + name);
  const std::filesystem::path dir = temp_dir.path();
  std::vector<std::string> argv{kBin + "/mgtrain-worker",
                                "model.type=mlp",
                                "model.hidden_sizes=64",
                                "data.dataset=synthetic",
                                "data.input_shape=1,8,8",
                                "data.synthetic_samples=4096",
                                "train.epochs=2",
                                "train.batch_size=64",
                                "optim.lr=0.05",
                                "checkpoint.dir=",
                                "launch.log_dir=" + dir.string()};
  argv.insert(argv.end(), settings.begin(), settings.end());
  CaptureOptions options;
  options.timeout_s = 300;
  return run_and_capture(argv, options);
}

ModelConfig small_mlp() {
  ModelConfig model;
  model.type = ModelType::Mlp;
  model.hidden_sizes = {16};
  return model;
}

}  // namespace

TEST_CASE("gpu path: ddp.backend auto follows the device, an explicit nccl on the CPU is a usage error", "[device]") {
  CHECK(resolve_backend(BackendChoice::Auto, kCpu) == "gloo");
  CHECK(resolve_backend(BackendChoice::Gloo, kCpu) == "gloo");
  CHECK(resolve_backend(BackendChoice::Auto, c10::Device(c10::kCUDA, 0)) == "nccl");
  CHECK_THROWS_AS(resolve_backend(BackendChoice::Nccl, kCpu), UsageError);
  CHECK_THROWS_WITH(resolve_backend(BackendChoice::Nccl, kCpu), Catch::Contains("ddp.backend: nccl needs a GPU"));
}

TEST_CASE("gpu path: without a GPU, train.device auto is the CPU and cuda is refused", "[device]") {
  if (have_gpu()) {
    WARN("skipped: this machine has a GPU (the [gpu] tests cover it)");
    return;
  }
  TrainConfig train;
  WorkerIdentity id;
  train.device = DeviceOption::Auto;
  CHECK(choose_training_device(train, id).device.is_cpu());
  train.device = DeviceOption::Cpu;
  CHECK(choose_training_device(train, id).fallback_warning.empty());
  train.device = DeviceOption::Cuda;
  CHECK_THROWS_WITH(choose_training_device(train, id), Catch::Contains("train.device: cuda was asked for"));
}

TEST_CASE("gpu path: the worker refuses ddp.backend nccl and ddp.strategy dp without a GPU (exit 2)",
          "[device][worker]") {
  if (have_gpu()) {
    WARN("skipped: this machine has a GPU");
    return;
  }
  const CapturedRun nccl = run_worker({"ddp.backend=nccl"}, "nccl");
  INFO(nccl.out << nccl.err);
  CHECK(nccl.exit_code == 2);
  CHECK(nccl.err.find("nccl") != std::string::npos);
  const CapturedRun dp = run_worker({"ddp.strategy=dp"}, "dp");
  INFO(dp.out << dp.err);
  CHECK(dp.exit_code == 2);
  CHECK(dp.err.find("ddp.strategy: dp") != std::string::npos);
}

TEST_CASE("gpu path: DataParallel replicas carry the master's values and names, and compute what it computes", "[dp]") {
  torch::manual_seed(3);
  const ModelInput input{{1, 4, 4}, 3};
  auto parallel = build_data_parallel_model(small_mlp(), input, {kCpu, kCpu});
  torch::manual_seed(3);
  auto plain = build_model(small_mlp(), input);
  const auto parallel_params = parallel->named_parameters();
  const auto plain_params = plain->named_parameters();
  REQUIRE(parallel_params.size() == plain_params.size());
  for (std::size_t i = 0; i < plain_params.size(); ++i) {
    CHECK(parallel_params[i].first == plain_params[i].first);  // the same names: checkpoints are interchangeable
    CHECK(at::equal(parallel_params[i].second, plain_params[i].second));
  }
  {
    at::NoGradGuard no_grad;  // a trained master: the replicas must carry its values, not fresh initial ones
    for (auto& [name, p] : parallel->named_parameters()) p.add_(0.25);
    for (auto& [name, p] : plain->named_parameters()) p.add_(0.25);
  }
  at::Tensor x = at::randn({8, 1, 4, 4});
  auto outputs = forward_replicas_for_test(*parallel, {x.narrow(0, 0, 4), x.narrow(0, 4, 4)}, {kCpu, kCpu});
  REQUIRE(outputs.size() == 2);
  const at::Tensor expected = plain->forward(x);
  CHECK(at::allclose(outputs[0], expected.narrow(0, 0, 4)));
  CHECK(at::allclose(outputs[1], expected.narrow(0, 4, 4)));
  CHECK_THAT(parallel->summary(), Catch::Contains("DataParallel over 2 devices"));
}

TEST_CASE("gpu path: replicating does not move the default random generator", "[dp]") {
  const ModelInput input{{1, 4, 4}, 3};
  auto parallel = build_data_parallel_model(small_mlp(), input, {kCpu});
  torch::manual_seed(9);
  forward_replicas_for_test(*parallel, {at::zeros({2, 1, 4, 4})}, {kCpu, kCpu});  // two rebuilds of the layer tree
  const at::Tensor after = at::rand({4});
  torch::manual_seed(9);
  CHECK(at::equal(after, at::rand({4})));
}

TEST_CASE("gpu: each rank binds cuda:LOCAL_RANK, and LOCAL_RANK beyond the visible GPUs is refused", "[gpu]") {
  if (!gpu_or_skip()) return;
  TrainConfig train;
  WorkerIdentity id;
  CHECK(choose_training_device(train, id).device == c10::Device(c10::kCUDA, 0));
  const int count = static_cast<int>(torch::cuda::device_count());
  if (count > 1) {
    id.local_rank = 1;
    CHECK(choose_training_device(train, id).device == c10::Device(c10::kCUDA, 1));
    id.local_rank = count;
    CHECK_THROWS_WITH(choose_training_device(train, id), Catch::Contains("has no GPU of its own"));
  }
}

TEST_CASE("gpu: train.gpu_memory_fraction caps the caching allocator", "[gpu]") {
  if (!gpu_or_skip()) return;
  const CapturedRun capped = run_worker({"train.device=cuda", "train.gpu_memory_fraction=0.000001"}, "fraction");
  INFO(capped.out << capped.err);
  CHECK(capped.exit_code != 0);  // a cap of ~80 KB cannot hold the model and a batch
  // The cap took effect (the allocator refused), not a failure to set it on an uninitialised allocator.
  CHECK(capped.err.find("out of memory") != std::string::npos);
  CHECK(capped.err.find("call init") == std::string::npos);
}

// Two ranks launched on a machine's one GPU (or on one GPU chosen for both).
CapturedRun launch_two_ranks_on_one_gpu(const std::string& backend, const std::string& name) {
  const testing::TempDir temp_dir("mgtrain-gpu-" + name);
  const std::filesystem::path dir = temp_dir.path();
  CaptureOptions options;
  options.timeout_s = 300;
  options.set_env = {{"CUDA_VISIBLE_DEVICES", "0"}};
  return run_and_capture(
      {kBin + "/mgtrain", "launch", "--nproc", "2", "model.type=mlp", "data.dataset=synthetic",
       "data.input_shape=1,8,8", "data.synthetic_samples=2048", "train.epochs=1", "train.device=cuda",
       "ddp.backend=" + backend, "checkpoint.dir=", "launch.log_dir=" + dir.string()},
      options);
}

TEST_CASE("gpu: two ranks on one GPU with NCCL are refused with what to change", "[gpu]") {
  if (!gpu_or_skip()) return;
  const CapturedRun run = launch_two_ranks_on_one_gpu("nccl", "shared-nccl");
  INFO(run.out << run.err);
  CHECK(run.exit_code != 0);
  CHECK(run.err.find("would share one GPU") != std::string::npos);
  CHECK(run.err.find("Duplicate GPU") == std::string::npos);  // ours, before NCCL's own
}

TEST_CASE("gpu: two ranks share one GPU over gloo with CUDA tensors", "[gpu]") {
  if (!gpu_or_skip()) return;
  const CapturedRun run = launch_two_ranks_on_one_gpu("gloo", "shared-gloo");
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("\"device\":\"cuda:0\"") != std::string::npos);
  CHECK(run.out.find("\"world_size\":2") != std::string::npos);
}

TEST_CASE("gpu: batches come in pinned memory for the GPU", "[gpu]") {
  if (!gpu_or_skip()) return;
  DataConfig data;
  data.dataset = DatasetKind::Synthetic;
  data.input_shape = {1, 4, 4};
  data.synthetic_samples = 64;
  auto source = open_data_source(data, Split::Train, 0, 1);
  BatchLoader loader(*source, {0, 1, 2, 3, 4, 5, 6, 7}, 4, false, 1, 2, 0, /*pin_memory=*/true);
  auto batch = loader.next();
  REQUIRE(batch);
  CHECK(batch->inputs.is_pinned());
  CHECK(batch->targets.is_pinned());
}

TEST_CASE("gpu: fp16 with loss scaling and bf16 train on one GPU and report their precision", "[gpu]") {
  if (!gpu_or_skip()) return;
  const CapturedRun fp16 = run_worker({"train.precision=fp16"}, "fp16");
  INFO(fp16.out << fp16.err);
  REQUIRE(fp16.exit_code == 0);
  CHECK(fp16.out.find("precision fp16") != std::string::npos);
  CHECK(fp16.out.find("\"loss_scale\":") != std::string::npos);
  CHECK(fp16.out.find("\"skipped_steps\":") != std::string::npos);
  CHECK(fp16.out.find("\"device\":\"cuda:0\"") != std::string::npos);
  const CapturedRun bf16 = run_worker({"train.precision=bf16"}, "bf16");
  INFO(bf16.out << bf16.err);
  REQUIRE(bf16.exit_code == 0);
  CHECK(bf16.out.find("precision bf16") != std::string::npos);
  CHECK(bf16.out.find("\"gpu_peak_mib\":") != std::string::npos);  // peak memory is reported
}

TEST_CASE("gpu: fp16 steps whose scaled gradients overflow are skipped and counted", "[gpu]") {
  if (!gpu_or_skip()) return;
  // A loss scale of 1e30 overflows fp16 gradients at once: the first steps are skipped while the scale backs off.
  const CapturedRun run = run_worker({"train.precision=fp16", "train.loss_scale_init=1e30"}, "fp16-overflow");
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  const std::size_t at = run.out.find("\"skipped_steps\":");
  REQUIRE(at != std::string::npos);
  CHECK(std::stoll(run.out.substr(at + std::string("\"skipped_steps\":").size())) >= 1);
}

TEST_CASE("gpu: the bf16 autocast scope runs linear in bf16 on CUDA and restores fp32 afterwards", "[gpu]") {
  if (!gpu_or_skip()) return;
  const c10::Device cuda(c10::kCUDA, 0);
  at::Tensor x = at::randn({4, 8}, at::TensorOptions().device(cuda));
  at::Tensor w = at::randn({3, 8}, at::TensorOptions().device(cuda));
  {
    AutocastScope scope(resolve_precision(PrecisionMode::Bf16, cuda), cuda);
    CHECK(torch_compat::autocast_enabled(c10::DeviceType::CUDA));
    CHECK(torch_compat::autocast_dtype(c10::DeviceType::CUDA) == at::kBFloat16);
    CHECK(at::linear(x, w).scalar_type() == at::kBFloat16);
  }
  CHECK(at::linear(x, w).scalar_type() == at::kFloat);
}

TEST_CASE("gpu: NCCL at world size 1 through the reducer (ddp.force_process_group)", "[gpu]") {
  if (!gpu_or_skip()) return;
  const testing::TempDir temp_dir("mgtrain-gpu-nccl-world-1");
  const std::filesystem::path dir = temp_dir.path();
  CaptureOptions options;
  options.timeout_s = 300;
  const CapturedRun run = run_and_capture(
      {kBin + "/mgtrain", "launch", "--nproc", "1", "model.type=mlp", "data.dataset=synthetic",
       "data.input_shape=1,8,8", "data.synthetic_samples=2048", "train.epochs=1", "train.device=cuda",
       "ddp.backend=nccl", "ddp.force_process_group=true", "checkpoint.dir=", "launch.log_dir=" + dir.string()},
      options);
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("\"backend\":\"nccl\"") != std::string::npos);
  CHECK(run.err.find("destroy_process_group") == std::string::npos);  // shut down in order, no warning at exit
}

TEST_CASE("gpu: two ranks over NCCL on two GPUs", "[gpu]") {
  if (!gpu_or_skip(2)) return;
  const testing::TempDir temp_dir("mgtrain-gpu-nccl");
  const std::filesystem::path dir = temp_dir.path();
  CaptureOptions options;
  options.timeout_s = 300;
  const CapturedRun run =
      run_and_capture({kBin + "/mgtrain", "launch", "--nproc", "2", "--gpu-ids", "auto", "model.type=mlp",
                       "data.dataset=synthetic", "data.input_shape=1,8,8", "data.synthetic_samples=4096",
                       "train.epochs=1", "checkpoint.dir=", "launch.log_dir=" + dir.string()},
                      options);
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("\"backend\":\"nccl\"") != std::string::npos);
  CHECK(run.err.find("--gpu-ids auto") != std::string::npos);
}

TEST_CASE("gpu: ddp.strategy dp trains in one process over two GPUs", "[gpu]") {
  if (!gpu_or_skip(2)) return;
  const CapturedRun run = run_worker({"ddp.strategy=dp"}, "dp-gpu");
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("DataParallel over") != std::string::npos);
}
