// The registry of models a worker adds (see model_registry.hpp).
#include "train/models/model_registry.hpp"

#include <utility>

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

struct RegisteredModel {
  PluginSpec spec;
  ModelFactory factory;
};

std::vector<RegisteredModel>& registry() {
  static std::vector<RegisteredModel> models;
  return models;
}

}  // namespace

void add_registered_model(PluginSpec spec, ModelFactory factory) {
  check_plugin_spec(spec, "model");
  if (parse_enum<ModelType>(spec.name))
    throw Error(fmt::format("register_model(\"{}\"): that is a built-in model's name", spec.name));
  for (const auto& m : registry())
    if (m.spec.name == spec.name) throw Error(fmt::format("register_model(\"{}\"): registered twice", spec.name));
  if (!factory) throw Error(fmt::format("register_model(\"{}\"): no factory", spec.name));
  registry().push_back({std::move(spec), std::move(factory)});
}

std::vector<PluginSpec> registered_model_specs() {
  std::vector<PluginSpec> specs;
  for (const auto& m : registry()) specs.push_back(m.spec);
  return specs;
}

std::unique_ptr<Model> build_registered_model(const ModelConfig& config, const ModelInput& input) {
  for (const auto& m : registry()) {
    if (m.spec.name != config.registered) continue;
    std::unique_ptr<Model> model = m.factory(ModelContext{input, PluginOptions(m.spec, config.options)});
    if (!model) throw Error(fmt::format("the factory of model {} returned no model", config.registered));
    return model;
  }
  throw UsageError(fmt::format("model.type {}: this worker registers no such model", config.registered));
}

}  // namespace mgtrain
