// A stand-in `mgtrain launch` for signal tests: sets LaunchConfig fields from key=value arguments
// and runs run_launch, so a test can send signals to a real launcher process independently of the CLI.
//   launch_harness nproc=2 grace_period=1 log_dir=/tmp/x run_id=r -- sh -c '...'
#include <cstdio>
#include <string>
#include <vector>

#include "launch/launch.hpp"
#include "util/error.hpp"

int main(int argc, char** argv) {
  mgtrain::LoadedConfig loaded;
  mgtrain::LaunchConfig& launch = loaded.config.launch;
  launch.run_id = "harness";
  mgtrain::LaunchRequest request;
  int index = 1;
  for (; index < argc && std::string(argv[index]) != "--"; ++index) {
    std::string setting = argv[index];
    std::size_t equals = setting.find('=');
    std::string key = setting.substr(0, equals), value = equals == std::string::npos ? "" : setting.substr(equals + 1);
    if (key == "nproc")
      launch.nproc = mgtrain::NprocSpec::parse(value).value();
    else if (key == "max_restarts")
      launch.max_restarts = std::stoll(value);
    else if (key == "grace_period")
      launch.grace_period = std::stod(value);
    else if (key == "hang_timeout")
      launch.hang_timeout = std::stod(value);
    else if (key == "log_dir")
      launch.log_dir = value;
    else if (key == "run_id")
      launch.run_id = value;
    else if (key == "master_port")
      launch.master_port = std::stoll(value);
    else {
      std::fprintf(stderr, "launch_harness: unknown setting %s\n", key.c_str());
      return 2;
    }
  }
  for (++index; index < argc; ++index) request.command.push_back(argv[index]);
  try {
    return mgtrain::run_launch(request, loaded);
  } catch (const mgtrain::Error& error) {
    std::fprintf(stderr, "launch_harness: %s\n", error.what());
    return error.exit_code();
  }
}
