// `mgtrain launch`: load the config (every source, flags included), then hand over to the supervisor.
#include <optional>
#include <string>

#include "commands.hpp"
#include "config/config_loader.hpp"
#include "config/plugin_catalog.hpp"
#include "launch/launch.hpp"
#include "launch/worker_plugins.hpp"
#include "slurm/slurm_environment.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace mgtrain {

int run_launch_command(const LaunchRequest& request) {
  for (const std::string& notice : request.notices) log::info("{}", notice);
  LoadOptions options;
  options.detect = slurm_launch_detector(current_environment());  // inside a SLURM job (docs/slurm.md)
  // The built-in trainer's config is checked against the worker that will run it (launch/worker_plugins.hpp), which
  // is asked once: a reload (below) has the same worker.
  LoadedConfig loaded = load_config(request.config, current_environment(), options);
  std::optional<PluginCatalog> catalog;
  if (request.command.empty()) {
    catalog = worker_plugin_catalog(loaded.config.launch, loaded.origin_of("launch.worker"));
    apply_plugin_catalog(loaded, *catalog);
  }
  LaunchEnvironment outside;
  // A node started without a run id adopts node 0's: its config is loaded again so ${run_id} expands to it.
  // The SLURM detection hook goes with it, or the reloaded config would lose what SLURM filled in.
  outside.reload_with_run_id = [&request, options, catalog](const std::string& run_id) {
    ConfigRequest again = request.config;
    again.flags.push_back({"launch.run_id", run_id, "--run-id"});
    LoadedConfig reloaded = load_config(again, current_environment(), options);
    if (catalog) apply_plugin_catalog(reloaded, *catalog);
    return reloaded;
  };
  // `mgtrain launch train.py` / `-m module`: run_launch puts the interpreter in front (launch/python_interpreter.hpp).
  return run_launch(request, loaded, outside);
}

}  // namespace mgtrain
