// Private to lib/cli: torchrun 2.15's launch options (torch/distributed/run.py, get_args_parser) and what mgtrain
// does with each: set a launch key (the flag itself is a row of cli_launch.cpp's kLaunchFlags), choose how the
// program runs (-m, --no-python, --run-path), accept with no effect, or refuse with the reason and what to use
// instead. Also torchrun's PET_<DEST> variables: the environment's value for an option not given as a flag.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config_request.hpp"
#include "util/environment.hpp"

namespace mgtrain::cli_detail {

// What torchrun's options that set no config key directly ask for.
struct TorchrunExtras {
  bool module = false;                // -m: python -m MODULE
  bool no_python = false;             // run the program itself
  bool run_path = false;              // run the program under the interpreter, whatever its name
  std::vector<FlagSetting> settings;  // launch keys that --rdzv-conf maps to
  std::optional<std::string> log_line_prefix_template;
  // --duplicate-stdout-filters / --duplicate-stderr-filters as given (torch's comma list, parsed by the console):
  // the launcher runs with PET_DUPLICATE_STDOUT_FILTERS / PET_DUPLICATE_STDERR_FILTERS set to them.
  std::optional<std::string> duplicate_stdout_filters;
  std::optional<std::string> duplicate_stderr_filters;
  std::vector<std::string> notices;  // for LaunchRequest::notices (`mgtrain launch` only)
};

// Where a value came from: `name` is "--rdzv_conf" (as typed) or "environment PET_RDZV_CONF"; `where` starts
// error messages: "--rdzv_conf a=1" or "environment PET_RDZV_CONF=a=1".
struct ValueSource {
  std::string name;
  std::string where;
};

// Checks a value and records what it asks for; throws UsageError starting with source.where when mgtrain refuses it.
using TorchrunApply = void (*)(const ValueSource& source, const std::string& value, TorchrunExtras& out);

// How torchrun's argparse converts an option's value (run.py: type=...): a value it cannot convert is a command line
// that does not parse (exit 2), also from a PET_ variable (argparse converts a string default too).
enum class ArgparseType { kStr, kInt, kFloat };

// One row of torchrun's options. The torchrun personality's --help (torchrun_help.hpp) is made from these rows: the
// spellings, metavar, torchrun's help and default, and mgtrain's note.
struct TorchrunOption {
  const char* dest;           // argparse's dest; torchrun reads PET_<DEST upper-cased>
  const char* names;          // torchrun's spellings, CLI11 style: "--run-path,--run_path"
  const char* metavar;        // the value's name in --help: nullptr for DEST (argparse's); "{a,b}" for choices
  bool reads_pet;             // action=env or check_env (logs_specs, numa_binding and print_completion have none)
  bool store_true;            // a flag without a value; its PET_ variable holds an integer (0: off)
  const char* key;            // the launch key the option sets (a kLaunchFlags row has its spellings); nullptr: `apply`
  TorchrunApply apply;        // with `key`: an extra check of the value (may be null); else handles the option
  const char* torchrun_help;  // torchrun 2.15's help for it (run.py), shortened where it says more than the option
  const char* default_value;  // what the torchrun personality uses without it (torchrun's default); nullptr: none
  const char* help;  // what mgtrain does differently: `launch --help` (options without a key), the personality's
                     // --help ("mgtrain: ..."), docs, `mgtrain env`
  ArgparseType type = ArgparseType::kStr;  // run.py's type= (its choices= are the metavar's "{a,b}")
};

// Every launch option of torchrun 2.15, in run.py's order (help and completion excepted).
const std::vector<TorchrunOption>& torchrun_options();
const TorchrunOption* torchrun_option_for_key(const std::string& key);
std::string pet_name(const TorchrunOption& option);  // "PET_NPROC_PER_NODE"

// The PET_* variables of `env` for the options the command line did not give: settings for launch keys go to
// `settings` (origin "environment PET_X"), the rest to `extras`. `given_keys` are keys a flag set, `given_dests`
// the other torchrun options given as flags. Unknown PET_ names are ignored, as torchrun does.
// `as_torchrun`: the torchrun personality, which first holds each value to check_as_argparse.
void read_pet_variables(const EnvMap& env, const std::set<std::string>& given_keys,
                        const std::set<std::string>& given_dests, std::vector<FlagSetting>& settings,
                        TorchrunExtras& extras, bool as_torchrun = false);

// torchrun's argparse's own checks of `value` for `option` given as `source` (a flag, or a PET_ variable when
// `from_environment`): its type (int(), float()) and, for a flag, its choices. Throws CommandLineError where torchrun's
// parser exits 2; the torchrun personality runs it before mgtrain's own checks of the value, whose refusals exit 1.
// Returns the value as argparse hands it on: a number without spaces, underscores or '+' (" 1_0" is 10).
std::string check_as_argparse(const TorchrunOption& option, const ValueSource& source, const std::string& value,
                              bool from_environment);
// The torchrun option one of whose spellings is `flag` ("--max_restarts"), or nullptr.
const TorchrunOption* torchrun_option_spelled(const std::string& flag);

// The config settings of every PET_* variable (config show/validate: no flags); refusals throw as for launch.
std::vector<FlagSetting> pet_settings(const EnvMap& env);

// --rdzv-conf "k=v,k=v" as launch key settings (errors start with source.where); what it ignores and the user may not
// expect goes to `notices`.
std::vector<FlagSetting> rdzv_conf_settings(const ValueSource& source, const std::string& text,
                                            std::vector<std::string>& notices);

}  // namespace mgtrain::cli_detail
