// A config checked against the worker that will run it, before any worker starts: the models and data sets the
// worker registers besides the built-ins (config/plugin_catalog.hpp), asked of the binary launch.worker names with
// `--describe-plugins`. The stock worker next to mgtrain registers none and is not asked.
#pragma once

#include "config/config_loader.hpp"
#include "config/plugin_catalog.hpp"

namespace mgtrain {

// What the worker of `launch` registers: launch.worker's answer to --describe-plugins, or nothing for the stock
// worker (not asked). `origin` is where launch.worker was set, for messages. Throws UsageError as below.
PluginCatalog worker_plugin_catalog(const LaunchConfig& launch, const std::string& origin);

// Applies the worker's catalog to `loaded` (apply_plugin_catalog: names, options, defaults). Throws UsageError for a
// config the worker would refuse, or for a launch.worker that cannot describe itself (not executable, not an
// mgtrain worker, failing or taking over 60 s).
// (A config loaded again for the same worker can reuse the catalog: apply_plugin_catalog.)
void check_config_against_worker(LoadedConfig& loaded);

}  // namespace mgtrain
