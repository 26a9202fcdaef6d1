// Public API: the model interface the trainer drives, and ModuleModel, which turns any torch::nn::Module with a
// `forward(Tensor) -> Tensor` into one. See docs/trainer.md#bring-your-own-model.
//
// What the trainer needs of a model (mgtrain::Model, train/models/model.hpp):
//   forward(inputs)      logits: [B, C] for classification, [B, T, V] for sequences
//   loss(logits, targets) mean cross entropy unless overridden
//   named_parameters()   trainable tensors with stable names, in a fixed order: they are DDP-synchronised,
//                        checkpointed and exported under these names
//   named_buffers()      non-trainable state (BatchNorm statistics, ...), broadcast from rank 0 and checkpointed
//   train(on), to(device), summary()
// Initialise parameters only from torch's global generator: the trainer seeds it with train.seed before calling the
// factory, and rank 0's state is broadcast anyway.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <torch/nn/module.h>

#include "train/models/model.hpp"

namespace mgtrain {

// A Model over a torch::nn::Module: M is the module class (e.g. struct ResidualMlpImpl : torch::nn::Module), held by
// shared_ptr; parameters and buffers are the module's, named as torch names them ("blocks.0.fc1.weight").
template <class M>
class ModuleModel final : public Model {
 public:
  explicit ModuleModel(std::shared_ptr<M> module, std::string description = "")
      : module_(std::move(module)), description_(std::move(description)) {}

  at::Tensor forward(const at::Tensor& inputs) override { return module_->forward(inputs); }
  NamedTensors named_parameters() override { return pairs(module_->named_parameters(/*recurse=*/true)); }
  NamedTensors named_buffers() override { return pairs(module_->named_buffers(/*recurse=*/true)); }
  void train(bool on) override { module_->train(on); }
  void to(const c10::Device& device) override { module_->to(device); }
  std::string summary() const override {
    std::int64_t count = 0;
    for (const auto& p : module_->parameters(/*recurse=*/true)) count += p.numel();
    return (description_.empty() ? module_->name() : description_) + ", " + std::to_string(count) + " parameters";
  }
  M& module() { return *module_; }

 private:
  static NamedTensors pairs(const torch::OrderedDict<std::string, at::Tensor>& dict) {
    NamedTensors out;
    for (const auto& item : dict) out.emplace_back(item.key(), item.value());
    return out;
  }

  std::shared_ptr<M> module_;
  std::string description_;
};

}  // namespace mgtrain
