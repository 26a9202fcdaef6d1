// Where the worker binary `mgtrain-worker` is: launch.worker (or MGTRAIN_LAUNCH_WORKER) if set,
// else next to the running `mgtrain` (build tree and installed prefix alike).
#pragma once

#include <string>

namespace mgtrain {

// Directory of the running executable (/proc/self/exe).
std::string executable_directory();

// The worker's path; throws UsageError naming the path tried and the override when it is not executable.
std::string find_worker_binary(const std::string& configured);

}  // namespace mgtrain
