// Gathers the HostFacts a launch plan (supervise/launch_plan.hpp) needs from the real machine: GPUs, CPUs, host name,
// cwd. The outside world of a launch, beside launch_environment.
#pragma once

#include "supervise/launch_plan.hpp"
#include "supervise/worker_env.hpp"

namespace mgtrain {

HostFacts probe_host_facts(const EnvMap& environment);

}  // namespace mgtrain
