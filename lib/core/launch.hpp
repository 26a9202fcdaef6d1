// `mgtrain launch`: runs the worker group on this node under the supervisor and returns the
// launcher's exit code (docs/launch.md). The torch-free entry point called by apps/mgtrain.
#pragma once

#include <functional>

#include "core/cli.hpp"
#include "core/config_loader.hpp"
#include "core/port_probe.hpp"
#include "core/worker_env.hpp"

namespace mgtrain {

// Runs request.command (an external program, like `torchrun --no-python`) or, when it is empty,
// the built-in trainer `<worker> <run_dir>/config.yaml`, with the settings of loaded.config.launch.
// Returns 0 on success, the root-cause worker's exit code (128+N for signal N) on failure, 124 for
// a hung worker, 128+N when the launcher got signal N (130 SIGINT, 143 SIGTERM).
// Throws UsageError (bad settings, busy port, missing program) before any worker starts.
int run_launch(const LaunchRequest& request, const LoadedConfig& loaded);

// The same with the outside world replaceable, for tests.
struct LaunchEnvironment {
  int stdout_fd = 1;                                  // the console
  int stderr_fd = 2;
  PortProbe* ports = nullptr;                         // nullptr: real sockets
  const EnvMap* environment = nullptr;        // nullptr: this process's environment
  // Multi-node: the config loaded again with another run id, for a node that was started without
  // one and adopts node 0's (so ${run_id} expands to it). Unset: only launch.run_id changes.
  std::function<LoadedConfig(const std::string& run_id)> reload_with_run_id;
};
int run_launch(const LaunchRequest& request, const LoadedConfig& loaded, const LaunchEnvironment& outside);

}  // namespace mgtrain
