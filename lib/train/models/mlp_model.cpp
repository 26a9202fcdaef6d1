// The `mlp` model: a multilayer perceptron laid out exactly like Python's
// nn.Sequential(nn.Flatten(), nn.Linear, nn.ReLU, [nn.Dropout,] ..., nn.Linear).
#include <fmt/format.h>

#include "train/models/layer_model.hpp"
#include "train/models/model_builders.hpp"
#include "util/error.hpp"

namespace mgtrain {

std::unique_ptr<Model> build_mlp_model(const ModelConfig& config, const ModelInput& input) {
  using namespace layers;
  int64_t width = 1;
  for (int64_t d : input.sample_shape) width *= d;
  std::string shape = std::to_string(width);
  auto net = std::make_shared<Sequence>();
  net->add(std::make_shared<Flatten>());
  for (int64_t hidden : config.hidden_sizes) {
    if (hidden < 1) throw UsageError(fmt::format("model.hidden_sizes: width {} must be at least 1", hidden));
    net->add(std::make_shared<Linear>(width, hidden)).add(std::make_shared<ReLU>());
    if (config.dropout > 0) net->add(std::make_shared<Dropout>(config.dropout));
    width = hidden;
    shape += fmt::format("-{}", hidden);
  }
  net->add(std::make_shared<Linear>(width, input.num_classes));
  shape += fmt::format("-{}", input.num_classes);
  return std::make_unique<LayerModel>(
      net, fmt::format("mlp {}{}", shape, config.dropout > 0 ? fmt::format(", dropout {}", config.dropout) : ""));
}

}  // namespace mgtrain
