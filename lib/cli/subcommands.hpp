// Private to lib/cli (not used outside it): the subcommands parse_cli (cli.cpp) registers with CLI11.
// Each one adds its options to the app when it is created and, after parsing, turns what CLI11 filled in
// into its CliRequest. `launch` is in cli_launch.cpp, all others in cli_subcommands.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "util/environment.hpp"

namespace CLI {
class App;
}

namespace mgtrain::cli_detail {

class Subcommand {
 public:
  virtual ~Subcommand() = default;
  // The request when this subcommand was given, else nullopt. Throws UsageError (e.g. a bad positional).
  virtual std::optional<CliRequest> request() = 0;
};

// `launch`: its arguments are split by hand before CLI11 sees them (flags, then the config or program,
// then what follows the program belongs to the program: torchrun's semantics).
class LaunchSubcommand : public Subcommand {
 public:
  // Splits the arguments after "launch", keeps the config, overrides and program, and returns the flag
  // tokens for CLI11. Throws UsageError for an unknown flag or a flag without its value.
  virtual std::vector<std::string> split_arguments(const std::vector<std::string>& args) = 0;
};

// Whom `launch`'s messages speak for: `mgtrain launch`, or the torchrun personality (`mgtrain torchrun`, or a link
// named `torchrun`). The personality's errors name its command and torchrun's spelling of a flag.
struct LaunchPersona {
  bool torchrun = false;
  std::string command = "mgtrain launch";  // as typed: "mgtrain launch", "mgtrain torchrun" or "torchrun"
  std::string where = "launch: ";          // how its messages start ("" for `torchrun`, the program's name says it)
};
LaunchPersona launch_persona(bool torchrun, bool as_torchrun);

// `env` is the environment the command runs in: torchrun's PET_* variables (torchrun_options.hpp).
std::unique_ptr<LaunchSubcommand> add_launch(CLI::App& app, const EnvMap& env, const LaunchPersona& persona);
// `config` and its show, validate, init and docs, in that order.
std::vector<std::unique_ptr<Subcommand>> add_config(CLI::App& app);
std::unique_ptr<Subcommand> add_env(CLI::App& app);
std::unique_ptr<Subcommand> add_tokenize(CLI::App& app);
std::unique_ptr<Subcommand> add_export(CLI::App& app);
std::unique_ptr<Subcommand> add_runs(CLI::App& app);
std::unique_ptr<Subcommand> add_plot(CLI::App& app);
std::unique_ptr<Subcommand> add_status(CLI::App& app);

// "KEY=VALUE" (not a flag): an override for launch and config show/validate.
bool looks_like_override(const std::string& arg);

}  // namespace mgtrain::cli_detail
