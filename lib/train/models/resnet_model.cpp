// The `resnet` model: the CIFAR-style ResNet for small images (three stages of basic blocks, 16/32/64 channels).
#include <cmath>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "train/models/layer_model.hpp"
#include "train/models/model_builders.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

using layers::BatchNorm2d;
using layers::Conv2d;

constexpr int64_t kStageWidths[] = {16, 32, 64};

std::shared_ptr<Conv2d> conv3x3(int64_t in, int64_t out, int64_t stride) {
  return std::make_shared<Conv2d>(in, out, 3, stride, 1, /*bias=*/false);
}

// torchvision's BasicBlock: conv-bn-relu-conv-bn plus the input (through a 1x1 conv + bn projection when the shape
// changes), then relu.
class BasicBlock final : public layers::Layer {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", conv3x3(in, out, stride))),
        bn1_(register_module("bn1", std::make_shared<BatchNorm2d>(out))),
        conv2_(register_module("conv2", conv3x3(out, out, 1))),
        bn2_(register_module("bn2", std::make_shared<BatchNorm2d>(out))) {
    if (stride != 1 || in != out) {
      auto projection = std::make_shared<layers::Sequence>();
      projection->add(std::make_shared<Conv2d>(in, out, 1, stride, 0, /*bias=*/false))
          .add(std::make_shared<BatchNorm2d>(out));
      downsample_ = register_module("downsample", projection);
    }
  }
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor y = bn2_->forward(conv2_->forward(bn1_->forward(conv1_->forward(x)).relu_()));
    return y.add_(downsample_ ? downsample_->forward(x) : x).relu_();
  }

 private:
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::shared_ptr<Conv2d> conv2_;
  std::shared_ptr<BatchNorm2d> bn2_;
  std::shared_ptr<layers::Sequence> downsample_;
};

class ResNet final : public layers::Layer {
 public:
  ResNet(int64_t in_channels, int64_t blocks, int64_t classes)
      : conv1_(register_module("conv1", conv3x3(in_channels, kStageWidths[0], 1))),
        bn1_(register_module("bn1", std::make_shared<BatchNorm2d>(kStageWidths[0]))) {
    int64_t width = kStageWidths[0];
    for (int stage = 0; stage < 3; ++stage) {
      auto layer = std::make_shared<layers::Sequence>();
      for (int64_t b = 0; b < blocks; ++b) {
        layer->add(std::make_shared<BasicBlock>(width, kStageWidths[stage], (stage > 0 && b == 0) ? 2 : 1));
        width = kStageWidths[stage];
      }
      stages_.push_back(register_module(fmt::format("layer{}", stage + 1), layer));
    }
    fc_ = register_module("fc", std::make_shared<layers::Linear>(width, classes));
    // torchvision's init: Kaiming normal (fan_out, relu) for convolutions; BatchNorm keeps weight 1 and bias 0.
    at::NoGradGuard no_grad;
    for (const auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<Conv2d>()) {
        const int64_t fan_out = conv->weight.size(0) * conv->weight.size(2) * conv->weight.size(3);
        conv->weight.normal_(0.0, std::sqrt(2.0) / std::sqrt(static_cast<double>(fan_out)));
      }
    }
  }
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor y = bn1_->forward(conv1_->forward(x)).relu_();
    for (const auto& stage : stages_) y = stage->forward(y);
    return fc_->forward(y.mean({2, 3}));
  }

 private:
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::vector<std::shared_ptr<layers::Sequence>> stages_;
  std::shared_ptr<layers::Linear> fc_;
};

}  // namespace

std::unique_ptr<Model> build_resnet_model(const ModelConfig& config, const ModelInput& input) {
  const auto& shape = input.sample_shape;
  if (shape.size() != 3 || shape[1] < 4 || shape[2] < 4) {
    throw UsageError(fmt::format(
        "model.type resnet needs image samples [channels, height, width] of at least 4x4; the data set has shape [{}]",
        fmt::join(shape, ", ")));
  }
  if (config.resnet_blocks < 1)
    throw UsageError(fmt::format("model.resnet_blocks: {} must be at least 1", config.resnet_blocks));
  std::string description =
      fmt::format("resnet-{} on {} ({} basic blocks per stage, widths 16/32/64), {} classes",
                  6 * config.resnet_blocks + 2, fmt::join(shape, "x"), config.resnet_blocks, input.num_classes);
  return std::make_unique<LayerModel>(std::make_shared<ResNet>(shape[0], config.resnet_blocks, input.num_classes),
                                      std::move(description));
}

}  // namespace mgtrain
