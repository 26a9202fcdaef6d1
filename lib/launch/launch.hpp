// `mgtrain launch`: runs the worker group on this node under the supervisor and returns the
// launcher's exit code (docs/launch.md). The torch-free entry point called by apps/mgtrain.
#pragma once

#include <functional>

#include "config/config_loader.hpp"
#include "config/config_request.hpp"
#include "launch/launch_environment.hpp"

namespace mgtrain {

// Runs request.command (an external program, like `torchrun --no-python`) or, when it is empty,
// the built-in trainer `<worker> <run_dir>/config.yaml`, with the settings of loaded.config.launch.
// Returns 0 on success, the root-cause worker's exit code (128+N for signal N) on failure, 124 for
// a hung worker, 128+N when the launcher got signal N (130 SIGINT, 143 SIGTERM).
// Throws UsageError (bad settings, busy port, missing program) before any worker starts.
int run_launch(const LaunchRequest& request, const LoadedConfig& loaded);

// The same with the outside world replaceable, for tests (launch_environment.hpp).
int run_launch(const LaunchRequest& request, const LoadedConfig& loaded, const LaunchEnvironment& outside);

}  // namespace mgtrain
