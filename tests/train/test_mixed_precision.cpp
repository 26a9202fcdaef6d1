// train.precision: resolving it per device (fp16 on a CPU is refused), the autocast scope (bf16 inside, fp32 after,
// the cast cache cleared so updated weights are seen), and bf16 training on the CPU with the real worker on the
// Fashion-MNIST MLP config: it converges like fp32 and says its precision.
#include "train/catch_with_torch.hpp"

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "process/run_capture.hpp"
#include "support/summary_line.hpp"
#include "support/temp_dir.hpp"
#include "train/loop/mixed_precision.hpp"
#include "train/torch/torch_compat.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using mgtrain::testing::summary_number;

namespace {

const std::string kBin = MGTRAIN_BIN_DIR;
const std::string kSource = MGTRAIN_SOURCE_DIR;
const c10::Device kCpu(c10::kCPU);

CapturedRun run_worker_on_mlp_config(const std::string& precision, const std::filesystem::path& dir) {
  const std::string config = kSource + "/configs/fashion_mnist_mlp.yaml";
  CaptureOptions options;
  options.timeout_s = 600;
  options.set_env["OMP_NUM_THREADS"] = "1";
  return run_and_capture({kBin + "/mgtrain-worker", config, "train.precision=" + precision, "train.max_steps=500",
                          "log.every_steps=100", "checkpoint.dir=", "launch.log_dir=" + dir.string()},
                         options);
}

}  // namespace

TEST_CASE("precision: fp32 and bf16 resolve on the CPU, fp16 there is a usage error pointing to bf16", "[precision]") {
  CHECK_FALSE(resolve_precision(PrecisionMode::Fp32, kCpu).autocast);
  const Precision bf16 = resolve_precision(PrecisionMode::Bf16, kCpu);
  CHECK(bf16.autocast);
  CHECK(bf16.dtype == at::kBFloat16);
  CHECK_FALSE(bf16.loss_scaling);
  CHECK_THROWS_AS(resolve_precision(PrecisionMode::Fp16, kCpu), UsageError);
  CHECK_THROWS_WITH(resolve_precision(PrecisionMode::Fp16, kCpu),
                    Catch::Contains("fp16 needs a CUDA device") && Catch::Contains("bf16"));
  const Precision fp16 =
      resolve_precision(PrecisionMode::Fp16, c10::Device(c10::kCUDA, 0));  // only resolved, nothing runs on a GPU
  CHECK(fp16.loss_scaling);
  CHECK(fp16.dtype == at::kHalf);
}

TEST_CASE("precision: the autocast scope runs linear in bf16 on the CPU and restores fp32 afterwards", "[precision]") {
  at::Tensor x = at::randn({4, 8});
  at::Tensor w = at::randn({3, 8});
  {
    AutocastScope scope(resolve_precision(PrecisionMode::Bf16, kCpu), kCpu);
    CHECK(torch_compat::autocast_enabled(c10::DeviceType::CPU));
    CHECK(at::linear(x, w).scalar_type() == at::kBFloat16);
  }
  CHECK_FALSE(torch_compat::autocast_enabled(c10::DeviceType::CPU));
  CHECK(at::linear(x, w).scalar_type() == at::kFloat);
  {
    AutocastScope scope(resolve_precision(PrecisionMode::Fp32, kCpu), kCpu);  // fp32: nothing switched on
    CHECK(at::linear(x, w).scalar_type() == at::kFloat);
  }
}

TEST_CASE("precision: weights updated in place between two autocast scopes are seen (the cast cache is cleared)",
          "[precision]") {
  at::Tensor x = at::ones({1, 4});
  at::Tensor w = at::ones({1, 4}, at::requires_grad());  // a leaf that requires grad: autocast caches its bf16 copy
  float first = 0, second = 0;
  {
    AutocastScope scope(resolve_precision(PrecisionMode::Bf16, kCpu), kCpu);
    first = at::linear(x, w).item<float>();
  }
  {
    at::NoGradGuard no_grad;
    w.mul_(3);  // the optimizer step
  }
  {
    AutocastScope scope(resolve_precision(PrecisionMode::Bf16, kCpu), kCpu);
    second = at::linear(x, w).item<float>();
  }
  CHECK(first == 4.0f);
  CHECK(second == 12.0f);
}

TEST_CASE("precision: bf16 training on the CPU converges on the MLP config like fp32", "[precision][worker]") {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    WARN(
        "skipped: Fashion-MNIST is not installed under /usr/share/datasets/fashion-mnist "
        "(configs/fashion_mnist_mlp.yaml)");
    return;
  }
  const testing::TempDir temp_dir("mgtrain-precision-bf16");
  const std::filesystem::path dir = temp_dir.path();
  const CapturedRun bf16 = run_worker_on_mlp_config("bf16", dir);
  INFO(bf16.out << bf16.err);
  REQUIRE(bf16.exit_code == 0);
  CHECK(bf16.out.find("precision bf16") != std::string::npos);  // the start line
  CHECK(bf16.out.find("\"precision\":\"bf16\"") != std::string::npos);
  const double bf16_accuracy = summary_number(bf16.out, "accuracy");
  CHECK(bf16_accuracy > 0.78);  // 500 steps of batch 64; chance is 0.1
  CHECK(summary_number(bf16.out, "final_train_loss") < 0.7);

  const CapturedRun fp32 = run_worker_on_mlp_config("fp32", dir);
  INFO(fp32.out << fp32.err);
  REQUIRE(fp32.exit_code == 0);
  CHECK(fp32.out.find("precision fp32") != std::string::npos);
  const double fp32_accuracy = summary_number(fp32.out, "accuracy");
  CHECK(std::abs(bf16_accuracy - fp32_accuracy) < 0.03);
  std::printf("bf16 accuracy %.4f, fp32 accuracy %.4f after 500 steps\n", bf16_accuracy, fp32_accuracy);
}

TEST_CASE("precision: fp16 asked for on the CPU stops the worker with exit 2 and says to use bf16",
          "[precision][worker]") {
  const testing::TempDir temp_dir("mgtrain-precision-fp16");
  const std::filesystem::path dir = temp_dir.path();
  CaptureOptions options;
  options.timeout_s = 120;
  const CapturedRun run =
      run_and_capture({kBin + "/mgtrain-worker", "model.type=mlp", "data.dataset=synthetic", "data.input_shape=1,4,4",
                       "data.synthetic_samples=64", "train.precision=fp16", "train.device=cpu",
                       "checkpoint.dir=", "launch.log_dir=" + dir.string()},
                      options);
  INFO(run.out << run.err);
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("train.precision: fp16 needs a CUDA device") != std::string::npos);
  CHECK(run.err.find("bf16") != std::string::npos);
}
