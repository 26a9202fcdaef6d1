// ddp.strategy dp over torch::nn::parallel::data_parallel (see data_parallel.hpp).
#include "train/parallel/data_parallel.hpp"

#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/nn/cloneable.h>

#ifdef MGTRAIN_WITH_CUDA
#include <torch/nn/parallel/data_parallel.h>  // includes CUDA headers: CUDA builds only
#endif

#include "train/models/layer_model.hpp"
#include "train/torch/torch_compat.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

// The layer tree as a Cloneable module, which data_parallel's replicate() needs: reset() rebuilds the tree from
// the config (same structure and names), and clone() then copies every parameter and buffer of the whole tree onto
// the replica's device (Cloneable::clone copies only the module's own, not its children's).
class ReplicableLayers final : public torch::nn::Cloneable<ReplicableLayers> {
 public:
  ReplicableLayers(ModelConfig config, ModelInput input) : config_(std::move(config)), input_(std::move(input)) {
    reset();
  }

  void reset() override {
    std::unique_ptr<Model> built = build_model(config_, input_);
    auto* layers = dynamic_cast<LayerModel*>(built.get());
    if (!layers) {
      throw UsageError(
          fmt::format("ddp.strategy dp cannot replicate model.type {}: use a built-in model (mlp, cnn, resnet, gpt) "
                      "or ddp.strategy: ddp",
                      config_.type));
    }
    description_ = built->summary();
    root_ = register_module("root", layers->module());
  }

  std::shared_ptr<torch::nn::Module> clone(
      const torch_compat::optional<c10::Device>& device = torch_compat::nullopt) const override {
    // Rebuilding draws initial values from the default generator: put its state back so replication does not
    // change the run's random stream (dropout, shuffling).
    auto generator = at::detail::getDefaultCPUGenerator();
    at::Tensor saved;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      saved = generator.get_state();
    }
    auto copy = std::dynamic_pointer_cast<ReplicableLayers>(torch::nn::Cloneable<ReplicableLayers>::clone(device));
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(saved);
    }
    at::NoGradGuard no_grad;
    auto copy_all = [&](const torch::OrderedDict<std::string, at::Tensor>& from,
                        torch::OrderedDict<std::string, at::Tensor> to) {
      for (const auto& item : from) {
        at::Tensor* target = to.find(item.key());
        if (!target) throw Error(fmt::format("internal error: DataParallel replica has no tensor {}", item.key()));
        target->set_data(device ? item.value().to(*device) : item.value().clone());
      }
    };
    copy_all(root_->named_parameters(true), copy->root_->named_parameters(true));
    copy_all(root_->named_buffers(true), copy->root_->named_buffers(true));
    copy->train(is_training());
    return copy;
  }

  at::Tensor forward(at::Tensor inputs) { return root_->forward(inputs); }
  const std::shared_ptr<layers::Layer>& root() const { return root_; }
  const std::string& description() const { return description_; }

 private:
  ModelConfig config_;
  ModelInput input_;
  std::shared_ptr<layers::Layer> root_;
  std::string description_;
};

class DataParallelModel final : public Model {
 public:
  DataParallelModel(std::shared_ptr<ReplicableLayers> module, std::vector<c10::Device> devices)
      : module_(std::move(module)), devices_(std::move(devices)) {}

  at::Tensor forward(const at::Tensor& inputs) override {
    if (devices_.size() == 1) return module_->forward(inputs.to(devices_.front()));
#ifdef MGTRAIN_WITH_CUDA
    return torch::nn::parallel::data_parallel(module_, inputs, devices_, devices_.front(), /*dim=*/0);
#else
    throw Error("internal error: DataParallel over several devices in a CPU-only build");
#endif
  }
  NamedTensors named_parameters() override { return named_tensors(module_->root()->named_parameters(true)); }
  NamedTensors named_buffers() override { return named_tensors(module_->root()->named_buffers(true)); }
  void train(bool on) override { module_->train(on); }
  void to(const c10::Device& device) override { module_->to(device); }
  std::string summary() const override {
    return fmt::format("{}, DataParallel over {} devices", module_->description(), devices_.size());
  }
  ReplicableLayers& module() { return *module_; }

 private:
  std::shared_ptr<ReplicableLayers> module_;
  std::vector<c10::Device> devices_;
};

}  // namespace

std::vector<c10::Device> data_parallel_devices(int world_size, PrecisionMode precision) {
#ifndef MGTRAIN_WITH_CUDA
  (void)world_size;
  (void)precision;
  throw UsageError(
      "ddp.strategy: dp (DataParallel over several GPUs in one process) needs a CUDA build, and this one is "
      "CPU-only: use ddp.strategy: ddp (build with CUDA: scripts/build-cuda.sh)");
#else
  if (!torch::cuda::is_available()) {
    throw UsageError("ddp.strategy: dp needs GPUs, and this process sees none: use ddp.strategy: ddp");
  }
  if (world_size != 1) {
    throw UsageError(
        fmt::format("ddp.strategy: dp runs in one process over all selected GPUs, but {} processes were started: "
                    "launch it with --nproc 1 (mgtrain launch does that itself for dp), or use ddp.strategy: ddp",
                    world_size));
  }
  if (precision != PrecisionMode::Fp32) {
    throw UsageError(
        fmt::format("ddp.strategy: dp trains in fp32 only (train.precision is {}; autocast does not reach "
                    "DataParallel's replica threads): use ddp.strategy: ddp for mixed precision",
                    precision));
  }
  std::vector<c10::Device> devices;
  const auto gpus = static_cast<std::size_t>(torch::cuda::device_count());  // size_t in 1.13, DeviceIndex in 2.x
  for (std::size_t i = 0; i < gpus; ++i) devices.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(i));
  return devices;
#endif
}

std::unique_ptr<Model> build_data_parallel_model(const ModelConfig& config, const ModelInput& input,
                                                 std::vector<c10::Device> devices) {
  if (devices.empty()) throw Error("internal error: DataParallel without devices");
  auto module = std::make_shared<ReplicableLayers>(config, input);
  module->to(devices.front());
  return std::make_unique<DataParallelModel>(std::move(module), std::move(devices));
}

std::vector<at::Tensor> forward_replicas_for_test(Model& model, const std::vector<at::Tensor>& chunks,
                                                  const std::vector<c10::Device>& devices) {
  auto* parallel = dynamic_cast<DataParallelModel*>(&model);
  if (!parallel) throw Error("forward_replicas_for_test needs a build_data_parallel_model model");
  std::vector<at::Tensor> outputs;
  for (std::size_t i = 0; i < devices.size() && i < chunks.size(); ++i) {
    auto replica = std::dynamic_pointer_cast<ReplicableLayers>(parallel->module().clone(devices[i]));
    outputs.push_back(replica->forward(chunks[i].to(devices[i])));
  }
  return outputs;
}

}  // namespace mgtrain
