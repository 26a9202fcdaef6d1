// The Model of the built-in architectures: a tree of layers (layers.hpp) whose root computes the logits. The
// torch::nn::Module tree provides names, registration order, train/eval mode and device moves.
#pragma once

#include <memory>
#include <string>

#include "train/models/layers.hpp"
#include "train/models/model.hpp"

namespace mgtrain {

class LayerModel final : public Model {
 public:
  LayerModel(std::shared_ptr<layers::Layer> root, std::string description)
      : root_(std::move(root)), description_(std::move(description)) {}

  at::Tensor forward(const at::Tensor& inputs) override { return root_->forward(inputs); }
  NamedTensors named_parameters() override { return to_pairs(root_->named_parameters(/*recurse=*/true)); }
  NamedTensors named_buffers() override { return to_pairs(root_->named_buffers(/*recurse=*/true)); }
  void train(bool on) override { root_->train(on); }
  void to(const c10::Device& device) override { root_->to(device); }
  // The layer tree (the TorchScript exporter walks it).
  const std::shared_ptr<layers::Layer>& root() const { return root_; }
  std::string summary() const override {
    int64_t count = 0;
    for (const auto& p : root_->parameters(/*recurse=*/true)) count += p.numel();
    return description_ + ", " + std::to_string(count) + " parameters";
  }

 private:
  static NamedTensors to_pairs(const torch::OrderedDict<std::string, at::Tensor>& dict) {
    NamedTensors out;
    out.reserve(dict.size());
    for (const auto& item : dict) out.emplace_back(item.key(), item.value());
    return out;
  }

  std::shared_ptr<layers::Layer> root_;
  std::string description_;
};

}  // namespace mgtrain
