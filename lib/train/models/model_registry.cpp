// The registry of models a worker adds (see model_registry.hpp).
#include "train/models/model_registry.hpp"

#include <utility>

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

PluginRegistry<ModelFactory>& registry() {
  static PluginRegistry<ModelFactory> models(
      "model", [](const std::string& name) { return parse_enum<ModelType>(name).has_value(); });
  return models;
}

}  // namespace

void add_registered_model(PluginSpec spec, ModelFactory factory) {
  registry().add(std::move(spec), std::move(factory));
}

std::vector<PluginSpec> registered_model_specs() { return registry().specs(); }

std::unique_ptr<Model> build_registered_model(const ModelConfig& config, const ModelInput& input) {
  const auto* entry = registry().find(config.registered);
  if (!entry) throw UsageError(fmt::format("model.type {}: this worker registers no such model", config.registered));
  std::unique_ptr<Model> model = entry->factory(ModelContext{input, PluginOptions(entry->spec, config.options)});
  if (!model) throw Error(fmt::format("the factory of model {} returned no model", config.registered));
  return model;
}

}  // namespace mgtrain
