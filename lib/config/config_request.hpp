// What to load a config from and what overrides it (the part of a command line that the config loader
// reads), and what `mgtrain launch` was asked to run. Plain data, filled by the command line (cli/cli.hpp)
// or by tests.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mgtrain {

// One config key set by a command-line flag, e.g. {"launch.nproc", "4", "--nproc"}.
struct FlagSetting {
  std::string key;
  std::string value;
  std::string flag;  // the spelling the user typed, for error messages
};

// Where the config comes from and what overrides it; shared by launch and config show/validate.
struct ConfigRequest {
  std::optional<std::string> path;      // the YAML file, if any
  std::vector<std::string> overrides;   // "a.b=c" from --set and bare arguments, in order
  std::vector<FlagSetting> flags;       // highest precedence
};

// `mgtrain launch [flags] [CONFIG.yaml [a.b=c ...]] [-- COMMAND ARGS...]`
struct LaunchRequest {
  ConfigRequest config;
  std::vector<std::string> command;     // empty: run the built-in trainer (mgtrain-worker)
  bool run_under_python = false;        // command is "-u [-m] script args": prefix it with launch.python
};

}  // namespace mgtrain
