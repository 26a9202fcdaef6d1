// Public API: registering models and data sets of your own, with the config keys they read, before run_worker.
// See docs/trainer.md#bring-your-own-model.
//
//   mgtrain::register_model(
//       {"residual_mlp", "an MLP with residual blocks",
//        {{"width", mgtrain::OptionType::Integer, "256", "hidden width", 1, 65536},
//         {"blocks", mgtrain::OptionType::Integer, "4", "residual blocks", 1, 1024}}},
//       [](const mgtrain::ModelContext& c) { ... c.options.integer("width") ... });
//
// A config then says `model.type: residual_mlp` and `model.options.width: 512`. The launcher asks the worker for
// what it registered (`my-worker --describe-plugins`) and refuses an unknown name, an undeclared option (with
// file:line:column and a did-you-mean), or a value of the wrong type before any worker starts; options left out get
// their declared defaults. An option declared with an empty default must be given (a string may be empty).
#pragma once

#include "config/plugin_catalog.hpp"  // OptionSpec, OptionType, PluginSpec, PluginOptions
#include "train/data/data_registry.hpp"
#include "train/models/model_registry.hpp"

namespace mgtrain {

// Adds a model: model.type `spec.name` builds it with `factory`. Throws mgtrain::Error for a name that is not
// a letter then letters, digits, '_' or '-', a built-in's name, a name registered twice, or an option default
// that does not fit its type.
void register_model(PluginSpec spec, ModelFactory factory);

// Adds a data set: data.dataset `spec.name` opens each split with `factory`. Same rules as register_model.
void register_data(PluginSpec spec, DataFactory factory);

}  // namespace mgtrain
