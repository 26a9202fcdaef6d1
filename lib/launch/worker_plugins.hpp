// A config checked against the worker that will run it, before any worker starts: the models and data sets the
// worker registers besides the built-ins (config/plugin_catalog.hpp), asked of the binary launch.worker names with
// `--describe-plugins`. The stock worker next to mgtrain registers none and is not asked.
#pragma once

#include "config/config_loader.hpp"

namespace mgtrain {

// Applies the worker's catalog to `loaded` (apply_plugin_catalog: names, options, defaults). Throws UsageError for a
// config the worker would refuse, or for a launch.worker that cannot describe itself (not executable, not an
// mgtrain worker, failing or taking over 60 s).
void check_config_against_worker(LoadedConfig& loaded);

}  // namespace mgtrain
