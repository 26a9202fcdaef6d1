// The models a worker registers besides the built-ins (model.type NAME; the public face is mgtrain/registry.hpp).
// Registration happens in main() before run_worker, on one thread; lookups come after.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/plugin_catalog.hpp"
#include "train/models/model.hpp"

namespace mgtrain {

// What a registered model's factory gets: the data set's shape facts and its checked options (model.options.*).
struct ModelContext {
  ModelInput input;
  PluginOptions options;
};

using ModelFactory = std::function<std::unique_ptr<Model>(const ModelContext&)>;

// Adds a model under spec.name. Throws Error for an invalid spec, a built-in's name or a name taken.
void add_registered_model(PluginSpec spec, ModelFactory factory);
// The registered models' declarations, in registration order.
std::vector<PluginSpec> registered_model_specs();
// Builds the registered model config.registered (apply_plugin_catalog checked the name and options).
std::unique_ptr<Model> build_registered_model(const ModelConfig& config, const ModelInput& input);

}  // namespace mgtrain
