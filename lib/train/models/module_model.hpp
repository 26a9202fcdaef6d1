// ModuleModel<M>: the Model over a torch::nn::Module tree, which provides names, registration order, train/eval mode
// and device moves. The built-in architectures are one over their layer tree (LayerModel, layer_model.hpp); a user's
// torch::nn module is another (the public mgtrain/model.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include <torch/nn/module.h>

#include "train/models/model.hpp"

namespace mgtrain {

// A module's named_parameters() / named_buffers() as the Model interface hands them out.
inline NamedTensors named_tensors(const torch::OrderedDict<std::string, at::Tensor>& dict) {
  NamedTensors out;
  out.reserve(dict.size());
  for (const auto& item : dict) out.emplace_back(item.key(), item.value());
  return out;
}

// M: a torch::nn::Module class with forward(Tensor) -> Tensor, held by shared_ptr; parameters and buffers are the
// module's, named as torch names them ("blocks.0.fc1.weight").
template <class M>
class ModuleModel final : public Model {
 public:
  explicit ModuleModel(std::shared_ptr<M> module, std::string description = "")
      : module_(std::move(module)), description_(std::move(description)) {}

  at::Tensor forward(const at::Tensor& inputs) override { return module_->forward(inputs); }
  NamedTensors named_parameters() override { return named_tensors(module_->named_parameters(/*recurse=*/true)); }
  NamedTensors named_buffers() override { return named_tensors(module_->named_buffers(/*recurse=*/true)); }
  void train(bool on) override { module_->train(on); }
  void to(const c10::Device& device) override { module_->to(device); }
  // One line: the description (else the module's name) and the parameter count.
  std::string summary() const override {
    std::int64_t count = 0;
    for (const auto& p : module_->parameters(/*recurse=*/true)) count += p.numel();
    return (description_.empty() ? module_->name() : description_) + ", " + std::to_string(count) + " parameters";
  }
  // The module itself (the TorchScript exporter and SyncBatchNorm walk the built-ins' layer tree).
  const std::shared_ptr<M>& module() const { return module_; }

 private:
  std::shared_ptr<M> module_;
  std::string description_;
};

}  // namespace mgtrain
