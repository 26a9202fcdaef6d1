// What `mgtrain-worker CONFIG [KEY=VALUE...]` does: resolve the config and the rank, then train.
#pragma once

#include <string>
#include <vector>

#include "config/plugin_catalog.hpp"

namespace mgtrain {

// Checks the config against the built-ins and what the worker registered (registered_plugins), then trains.
int run_training_worker(const std::vector<std::string>& args);

// The models and data sets this worker registered (mgtrain/registry.hpp), as the launcher reads them.
PluginCatalog registered_plugins();

}  // namespace mgtrain
