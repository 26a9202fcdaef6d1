// The model factory and the parts of the Model interface shared by all architectures (see model.hpp).
#include "train/models/model.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "train/models/model_builders.hpp"
#include "train/models/model_registry.hpp"
#include "util/error.hpp"

namespace mgtrain {

Model::~Model() = default;

at::Tensor Model::loss(const at::Tensor& logits, const at::Tensor& targets) {
  if (logits.dim() == 3) return at::cross_entropy_loss(logits.reshape({-1, logits.size(2)}), targets.reshape({-1}));
  return at::cross_entropy_loss(logits, targets);
}

int64_t parameter_count(Model& model) {
  int64_t count = 0;
  for (const auto& named : model.named_parameters()) count += named.second.numel();
  return count;
}

std::unique_ptr<Model> build_model(const ModelConfig& config, const ModelInput& input) {
  if (config.type == ModelType::Torchscript) return build_torchscript_model(config, input);
  if (config.type == ModelType::Registered) return build_registered_model(config, input);
  if (input.sample_shape.empty())
    throw UsageError(fmt::format("model.type {}: the data set reports an empty sample shape", config.type));
  if (input.num_classes < 1)
    throw UsageError(fmt::format("model.type {}: the data set reports {} classes", config.type, input.num_classes));
  switch (config.type) {  // -Wswitch: a new ModelType must be handled here
    case ModelType::Mlp:
      return build_mlp_model(config, input);
    case ModelType::Cnn:
      return build_cnn_model(config, input);
    case ModelType::Resnet:
      return build_resnet_model(config, input);
    case ModelType::Gpt:
      return build_gpt_model(config, input);
    case ModelType::Torchscript:
    case ModelType::Registered:
      break;  // built above
  }
  throw Error(fmt::format("internal error: no builder for model.type {}", config.type));
}

}  // namespace mgtrain
