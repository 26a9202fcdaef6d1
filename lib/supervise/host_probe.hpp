// Gathers the HostFacts a launch plan needs from the real machine: GPUs, CPUs, host name, cwd.
#pragma once

#include "supervise/launch_plan.hpp"
#include "supervise/worker_env.hpp"

namespace mgtrain {

HostFacts probe_host_facts(const EnvMap& environment);

}  // namespace mgtrain
