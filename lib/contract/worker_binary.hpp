// Where the worker binary `mgtrain-worker` is: launch.worker (or MGTRAIN_LAUNCH_WORKER) if set, else next to the
// running `mgtrain` (build tree and installed prefix alike), else the one the trainer wheel installed into the same
// Python environment (<bin>/../lib/python3.*/{site,dist}-packages/mgtrain_trainer/bin/mgtrain-worker: venvs,
// `pip install --user` and /usr/local alike put scripts in <prefix>/bin and packages under <prefix>/lib).
#pragma once

#include <string>
#include <vector>

namespace mgtrain {

// The worker's flag that prints what it registers besides the built-ins (config/plugin_catalog.hpp's YAML) and
// exits 0: the launcher checks a config's model.type, data.dataset and their options against it.
inline constexpr const char* kDescribePluginsFlag = "--describe-plugins";

// Directory of the running executable (/proc/self/exe).
std::string executable_directory();

// The trainer wheel's workers an executable in `bin_directory` can see: every existing
// <bin_directory>/../lib/python3.*/{site,dist}-packages/mgtrain_trainer/bin/mgtrain-worker, sorted.
std::vector<std::string> wheel_workers(const std::string& bin_directory);

// The worker's path; throws UsageError naming the paths tried and the override when none is executable, or the
// candidates when the environment holds the trainer wheel for several Python versions.
std::string find_worker_binary(const std::string& configured);

}  // namespace mgtrain
