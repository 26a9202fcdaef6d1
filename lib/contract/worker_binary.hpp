// Where the worker binary `mgtrain-worker` is: launch.worker (or MGTRAIN_LAUNCH_WORKER) if set,
// else next to the running `mgtrain` (build tree and installed prefix alike).
#pragma once

#include <string>

namespace mgtrain {

// The worker's flag that prints what it registers besides the built-ins (config/plugin_catalog.hpp's YAML) and
// exits 0: the launcher checks a config's model.type, data.dataset and their options against it.
inline constexpr const char* kDescribePluginsFlag = "--describe-plugins";

// Directory of the running executable (/proc/self/exe).
std::string executable_directory();

// The worker's path; throws UsageError naming the path tried and the override when it is not executable.
std::string find_worker_binary(const std::string& configured);

}  // namespace mgtrain
