// What to load a config from and what overrides it (the part of a command line that the config loader
// reads), and what `mgtrain launch` was asked to run. Plain data, filled by the command line (cli/cli.hpp)
// or by tests.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mgtrain {

// How the launcher presents itself: `mgtrain launch`, or torchrun 2.x as scripts and operators observe it (the
// binary invoked as `torchrun`, or `mgtrain torchrun`; docs/torchrun.md#the-torchrun-personality). Not a config key:
// a property of the command line, carried by ConfigRequest and LaunchPlan.
enum class Personality { Mgtrain, Torchrun };

// One config key set by a command-line flag, e.g. {"launch.nproc", "4", "--nproc"}, or by one of torchrun's
// PET_* variables, e.g. {"launch.nnodes", "2", "PET_NNODES", "environment PET_NNODES", "environment PET_NNODES=2"}.
struct FlagSetting {
  FlagSetting() = default;
  FlagSetting(std::string key_, std::string value_, std::string flag_, std::string origin_ = "",
              std::string where_ = "")
      : key(std::move(key_)),
        value(std::move(value_)),
        flag(std::move(flag_)),
        origin(std::move(origin_)),
        where(std::move(where_)) {}

  std::string key;
  std::string value;
  std::string flag;    // the spelling the user typed (or the variable's name), for error messages
  std::string origin;  // what `config show --show-origin` says; empty: "<flag> <value>"
  std::string where;   // what an error about the value starts with; empty: "<flag> <value>"

  std::string origin_text() const { return origin.empty() ? flag + " " + value : origin; }
  std::string where_text() const { return where.empty() ? flag + " " + value : where; }
};

// Where the config comes from and what overrides it; shared by launch and config show/validate.
struct ConfigRequest {
  std::optional<std::string> path;       // the YAML file, if any
  std::vector<std::string> overrides;    // "a.b=c" from --set and bare arguments, in order
  std::vector<FlagSetting> environment;  // torchrun's PET_* variables: above overrides, below flags
  std::vector<FlagSetting> flags;        // highest precedence
  // Invoked as torchrun: the keys no source set take torchrun's defaults (config_loader.cpp).
  Personality personality = Personality::Mgtrain;
};

// `mgtrain launch [flags] [CONFIG.yaml [a.b=c ...]] [-- COMMAND ARGS...]`
struct LaunchRequest {
  ConfigRequest config;
  std::vector<std::string> command;  // empty: run the built-in trainer (mgtrain-worker)
  bool run_under_python = false;     // command is "-u [-m] script args": prefix it with launch.python
  // torchrun's --log-line-prefix-template (or PET_LOG_LINE_PREFIX_TEMPLATE): it wins over the launcher's
  // TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, as in torchrun (launch.cpp's set_console_settings: LaunchPlan::line_prefix).
  std::optional<std::string> log_line_prefix_template;
  // --duplicate-stdout-filters / --duplicate-stderr-filters (the flags; their PET_ variables are read where they
  // are): they win over the launcher's PET_DUPLICATE_STDOUT_FILTERS / PET_DUPLICATE_STDERR_FILTERS.
  std::optional<std::string> duplicate_stdout_filters;
  std::optional<std::string> duplicate_stderr_filters;
  // --rdzv-token: the rendezvous secret (launch/rendezvous_secret.hpp); kept out of the config, which is
  // written to the run directory.
  std::optional<std::string> rdzv_token;
  // Lines for stderr before the launch, about what the command line asked for (a flag given twice with different
  // values: the last one is used).
  std::vector<std::string> notices;
};

}  // namespace mgtrain
