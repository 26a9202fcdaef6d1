// What a launch takes from the world outside, replaceable for tests: the console's descriptors, the port
// probe, the environment, and how to reload the config with another run id (launch/launch.hpp). The
// node agent and the --hosts launcher get the pieces they use from it as plain arguments
// (multinode/node_agent.hpp's NodeAgentOutside, run_hosts_launch).
#pragma once

#include <functional>
#include <string>

#include "config/config_loader.hpp"
#include "host/port_probe.hpp"
#include "util/environment.hpp"

namespace mgtrain {

struct LaunchEnvironment {
  int stdout_fd = 1;  // the console
  int stderr_fd = 2;
  PortProbe* ports = nullptr;           // nullptr: real sockets
  const EnvMap* environment = nullptr;  // nullptr: this process's environment
  // Multi-node: the config loaded again with another run id, for a node that was started without
  // one and adopts node 0's (so ${run_id} expands to it). Unset: only launch.run_id changes.
  std::function<LoadedConfig(const std::string& run_id)> reload_with_run_id;
};

}  // namespace mgtrain
