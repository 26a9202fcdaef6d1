// Asking launch.worker what it registers, and checking the config against it (see worker_plugins.hpp).
#include "launch/worker_plugins.hpp"

#include <fmt/format.h>

#include "config/plugin_catalog.hpp"
#include "contract/worker_binary.hpp"
#include "process/run_capture.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

PluginCatalog describe_worker(const std::string& worker, const std::string& origin) {
  CaptureOptions options;
  options.timeout_s = 60.0;
  const CapturedRun run = run_and_capture({worker, kDescribePluginsFlag}, options);
  const std::string command = worker + " " + kDescribePluginsFlag;
  if (run.exit_code != 0) {
    const std::string err = run.err.size() > 2000 ? run.err.substr(run.err.size() - 2000) : run.err;
    throw UsageError(fmt::format(
        "{}: launch.worker {}: `{}` {} (a worker built with mgtrain::trainer answers it; mgtrain-worker does too){}{}",
        origin, worker, command,
        run.timed_out ? "took over 60 s"
                      : (run.signal ? fmt::format("was killed by signal {}", run.signal)
                                    : fmt::format("exited with {}", run.exit_code)),
        err.empty() ? "" : "; it said:\n", err));
  }
  return catalog_from_yaml(run.out, command);
}

}  // namespace

PluginCatalog worker_plugin_catalog(const LaunchConfig& launch, const std::string& origin) {
  if (launch.worker.empty()) return {};  // the stock worker registers nothing
  return describe_worker(find_worker_binary(launch.worker), origin);
}

void check_config_against_worker(LoadedConfig& loaded) {
  apply_plugin_catalog(loaded, worker_plugin_catalog(loaded.config.launch, loaded.origin_of("launch.worker")));
}

}  // namespace mgtrain
