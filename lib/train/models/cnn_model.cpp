// The `cnn` model: conv3x3 (+BatchNorm) + ReLU + 2x2 max-pool blocks, then a fully connected classifier.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "train/models/layer_model.hpp"
#include "train/models/model_builders.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

// Python: class Cnn(nn.Module) with self.features = nn.Sequential(...) and self.classifier = nn.Sequential(...).
class Cnn final : public layers::Layer {
 public:
  Cnn(std::shared_ptr<layers::Sequence> features, std::shared_ptr<layers::Sequence> classifier)
      : features_(register_module("features", std::move(features))),
        classifier_(register_module("classifier", std::move(classifier))) {}
  at::Tensor forward(const at::Tensor& x) override { return classifier_->forward(features_->forward(x)); }

 private:
  std::shared_ptr<layers::Sequence> features_, classifier_;
};

}  // namespace

std::unique_ptr<Model> build_cnn_model(const ModelConfig& config, const ModelInput& input) {
  using namespace layers;
  const auto& shape = input.sample_shape;
  if (shape.size() != 3) {
    throw UsageError(
        fmt::format("model.type cnn needs image samples [channels, height, width]; the data set has shape [{}]",
                    fmt::join(shape, ", ")));
  }
  int64_t channels = shape[0], height = shape[1], width = shape[2];
  auto features = std::make_shared<Sequence>();
  for (int64_t out : config.channels) {
    if (out < 1) throw UsageError(fmt::format("model.channels: {} must be at least 1", out));
    if (height < 2 || width < 2) {
      throw UsageError(fmt::format("model.channels: {} conv+pool blocks pool a {}x{} input below 1x1",
                                   config.channels.size(), shape[1], shape[2]));
    }
    // With batch norm right after it, a convolution bias would be cancelled by the normalisation: none then.
    features->add(std::make_shared<Conv2d>(channels, out, 3, 1, 1, /*bias=*/!config.batch_norm));
    if (config.batch_norm) features->add(std::make_shared<BatchNorm2d>(out));
    features->add(std::make_shared<ReLU>()).add(std::make_shared<MaxPool2d>(2));
    channels = out;
    height /= 2;
    width /= 2;
  }
  int64_t flat = channels * height * width;
  auto classifier = std::make_shared<Sequence>();
  classifier->add(std::make_shared<Flatten>());
  for (int64_t fc : config.fc_sizes) {
    if (fc < 1) throw UsageError(fmt::format("model.fc_sizes: width {} must be at least 1", fc));
    classifier->add(std::make_shared<Linear>(flat, fc)).add(std::make_shared<ReLU>());
    if (config.dropout > 0) classifier->add(std::make_shared<Dropout>(config.dropout));
    flat = fc;
  }
  classifier->add(std::make_shared<Linear>(flat, input.num_classes));
  std::string description = fmt::format(
      "cnn on {}: conv [{}]{}, fc [{}]{}, {} classes", fmt::join(shape, "x"), fmt::join(config.channels, ", "),
      config.batch_norm ? " with batch norm" : "", fmt::join(config.fc_sizes, ", "),
      config.dropout > 0 ? fmt::format(" dropout {}", config.dropout) : "", input.num_classes);
  return std::make_unique<LayerModel>(std::make_shared<Cnn>(features, classifier), std::move(description));
}

}  // namespace mgtrain
