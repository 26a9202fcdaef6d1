// `mgtrain launch`: load the config, then hand over to the supervisor.
#include "commands.hpp"
#include "core/config_loader.hpp"
#include "core/error.hpp"

namespace mgtrain {

int run_launch_command(const LaunchRequest& request) {
  LoadedConfig loaded = load_config(request.config, current_environment());
  (void)loaded;
  throw Error("launch: not wired yet");
}

}  // namespace mgtrain
