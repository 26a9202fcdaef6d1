// `mgtrain launch`: the launch-flag table (each flag sets a config key; help comes from the schema) and the
// argument handling. The arguments are pre-split by hand first: flags, then the config or program, then what
// follows the program belongs to the program (torchrun's semantics), so CLI11 only ever sees flags.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/subcommands.hpp"
#include "cli/torchrun_options.hpp"
#include "config/config_schema.hpp"
#include "util/did_you_mean.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain::cli_detail {
namespace {

// A `mgtrain launch` flag that sets a config key. Help text comes from the schema. torchrun's options that set
// no key (--rdzv-conf, -m, --numa-binding ...) are in torchrun_options.cpp.
struct LaunchFlag {
  const char* names;  // CLI11 spelling: the first long name is the canonical one
  const char* key;
  bool takes_value;
  const char* flag_value = "true";  // what a flag without a value sets the key to
};

constexpr LaunchFlag kLaunchFlags[] = {
    {"--nproc,--nproc-per-node,--nproc_per_node", "launch.nproc", true},
    {"--nnodes", "launch.nnodes", true},
    {"--node-rank,--node_rank", "launch.node_rank", true},
    {"--master-addr,--master_addr", "launch.master_addr", true},
    {"--master-port,--master_port", "launch.master_port", true},
    {"--max-restarts,--max_restarts", "launch.max_restarts", true},
    {"--run-id,--run_id,--rdzv-id,--rdzv_id", "launch.run_id", true},
    {"--log-dir,--log_dir", "launch.log_dir", true},
    {"-t,--tee", "launch.tee", true},
    {"-r,--redirect,--redirects", "launch.redirect", true},
    {"--local-ranks-filter,--local_ranks_filter", "launch.local_ranks_filter", true},
    {"--tty", "launch.tty", true},
    {"--gpu-ids,--gpu_ids", "launch.gpu_ids", true},
    {"--virtual-local-rank,--virtual_local_rank", "launch.virtual_local_rank", false},
    {"--grace-period,--grace_period", "launch.grace_period", true},
    {"--threads-per-worker,--threads_per_worker", "launch.threads_per_worker", true},
    {"--standalone", "launch.standalone", false},
    {"--slurm", "launch.slurm", true},
    {"--no-requeue,--no_requeue", "launch.slurm_requeue", false, "false"},
    {"--hang-timeout,--hang_timeout,--heartbeat-timeout,--heartbeat_timeout", "launch.hang_timeout", true},
    {"--diagnose-timeout,--diagnose_timeout", "launch.diagnose_timeout", true},
    {"--worker", "launch.worker", true},
    {"--python", "launch.python", true},
    {"--role", "launch.role", true},
    {"--local-addr,--local_addr", "launch.local_addr", true},
    {"--shutdown-timeout,--shutdown_timeout", "launch.grace_period", true},
    {"--signals-to-handle,--signals_to_handle", "launch.signals_to_handle", true},
    {"--rdzv-endpoint,--rdzv_endpoint", "launch.rdzv_endpoint", true},
    {"--rdzv-backend,--rdzv_backend", "launch.rdzv_backend", true},
    {"--rdzv-token-file,--rdzv_token_file", "launch.rdzv_token_file", true},
    {"--join-timeout,--join_timeout", "launch.join_timeout", true},
    {"--last-call-timeout,--last_call_timeout", "launch.last_call_timeout", true},
    {"--node-timeout,--node_timeout", "launch.node_timeout", true},
    {"--node-heartbeat-interval,--node_heartbeat_interval", "launch.node_heartbeat_interval", true},
    {"--allow-uneven-nproc,--allow_uneven_nproc", "launch.allow_uneven_nproc", false},
    {"--hosts", "launch.hosts", true},
    {"--hostfile", "launch.hostfile", true},
    {"--remote-shell,--remote_shell", "launch.remote_shell", true},
    {"--exit-with-stdin", "launch.exit_with_stdin", false},
    {"--status-port,--status_port", "launch.status_port", true},
    {"--status-bind,--status_bind", "launch.status_bind", true},
    {"--no-straggler-detection", "launch.straggler_detection", false, "false"},
    {"--straggler-margin,--straggler_margin", "launch.straggler_margin", true},
    {"--straggler-window,--straggler_window", "launch.straggler_window", true},
    {"--termination-log,--termination_log", "launch.termination_log", true},
    {"--console-dedup,--console_dedup", "launch.console_dedup", false, "on"},
    {"--no-console-dedup,--no_console_dedup", "launch.console_dedup", false, "off"},
};

// The spellings of a CLI11 option spec: "--nproc,--nproc_per_node" -> {"--nproc", "--nproc_per_node"}.
std::vector<std::string> names_of(const std::string& spec) { return split(spec, ','); }

std::string canonical_name(const std::string& spec) {
  for (const auto& n : names_of(spec))
    if (starts_with(n, "--")) return n;
  return names_of(spec).front();
}

bool is_yaml_path(const std::string& arg) {
  // a name before the suffix: ".yaml" alone is not a config path
  auto named = [&](std::string_view suffix) { return arg.size() > suffix.size() && ends_with(arg, suffix); };
  return named(".yaml") || named(".yml");
}

// "train.epochs=3": a KEY=VALUE whose key is a dotted config path (a program's "a=b" argument is not).
bool looks_like_config_override(const std::string& arg) {
  const auto eq = arg.find('=');
  if (!looks_like_override(arg)) return false;
  const std::string key = arg.substr(0, eq);
  return key.find('.') != std::string::npos && key.find('/') == std::string::npos;
}

// Laid out for the terminal by the formatter (help_layout.hpp's wrap_lines): each line is wrapped on its own, so a
// paragraph is one line here.
const char* kLaunchFooter =
    R"(The config's launch: section, MGTRAIN_LAUNCH_* variables and --set launch.KEY=VALUE set the same values; torchrun's PET_* variables (PET_NNODES, PET_NPROC_PER_NODE ...) win over those, and a flag wins over all of them. Every torchrun 2.15 flag is accepted with its meaning, or refused saying what to use (docs/torchrun.md).

Forms:
  mgtrain launch [FLAGS] CONFIG.yaml [KEY=VALUE ...]
      the built-in trainer, one mgtrain-worker per rank
  mgtrain launch [FLAGS] KEY=VALUE ...
      the built-in trainer on the defaults plus overrides
  mgtrain launch [FLAGS] [CONFIG.yaml] -- COMMAND [ARGS]
      any program, e.g. -- python3 train.py
  mgtrain launch [FLAGS] train.py [ARGS]
      a .py script runs under launch.python (--no-python runs it directly; -m: a module; --run-path: any script under launch.python)
Everything after the script or program is its own, a literal -- included. In COMMAND's arguments ${local_rank} is replaced per worker.

Examples:
  mgtrain launch --nproc 2 configs/fashion_mnist_cnn.yaml
  mgtrain launch --nproc 4 --max-restarts 3 configs/fashion_mnist_cnn.yaml optim.lr=0.05
  mgtrain launch --nnodes 2 --node-rank 0 --master-addr node0 --master-port 29500 --nproc 8 cfg.yaml
  mgtrain launch --nnodes 1:4 --rdzv-endpoint node0:29400 --rdzv-id job7 --nproc 8 cfg.yaml   (elastic)
  mgtrain launch --hosts node0:8,node1:8 cfg.yaml   (one agent per host over ssh; docs/multinode.md)
  mgtrain launch --rdzv-backend c10d --rdzv-endpoint localhost:0 --nnodes 1 --nproc 2 train.py   (free port)
  mgtrain launch --nproc_per_node 2 train.py --epochs 3   (a torchrun command line, one word changed))";

// Everything `launch` needs to know about an option token during the pre-split.
// The secret's flag: no config key, so no kLaunchFlags row.
constexpr const char* kRdzvTokenNames = "--rdzv-token,--rdzv_token";

struct OptionInfo {
  bool takes_value;
  std::string target;  // what it sets: a launch key, a torchrun option's dest, or its own name (--set, --rdzv-token)
};

std::map<std::string, OptionInfo> launch_option_table() {
  std::map<std::string, OptionInfo> table;
  for (const auto& f : kLaunchFlags)
    for (const auto& n : names_of(f.names)) table[n] = {f.takes_value, f.key};
  for (const auto& option : torchrun_options()) {
    if (option.key) continue;  // its spellings are a kLaunchFlags row
    for (const auto& n : names_of(option.names)) table[n] = {!option.store_true, option.dest};
  }
  table["--set"] = {true, "--set"};
  for (const auto& n : names_of(kRdzvTokenNames)) table[n] = {true, "--rdzv-token"};
  for (const char* n : {"-h", "--help"}) table[n] = {false, "--help"};
  return table;
}

// A value the command line gave, as typed: `--nproc=4` and `--nproc 4` are {"--nproc", "4"}; a flag's value is "".
struct GivenValue {
  std::string flag;
  std::string value;
  std::size_t position = 0;  // among the option tokens
};

// The values of the option tokens (split_launch_args's, known flags only) by what they set (OptionInfo::target), in
// command-line order.
std::map<std::string, std::vector<GivenValue>> given_values(const std::vector<std::string>& tokens) {
  static const auto table = launch_option_table();
  std::map<std::string, std::vector<GivenValue>> given;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto eq = tokens[i].find('=');
    const std::string name = tokens[i].substr(0, eq);
    const auto found = table.find(name);
    if (found == table.end()) continue;
    std::string value;
    const std::size_t position = i;
    if (eq != std::string::npos) {
      value = tokens[i].substr(eq + 1);
    } else if (found->second.takes_value && i + 1 < tokens.size()) {
      value = tokens[++i];
    }
    given[found->second.target].push_back({name, value, position});
  }
  return given;
}

// `mgtrain launch`'s one line about an option given more than once with different values: the last one wins, as in
// torchrun (and so a wrapper can append to a base command line). The secret of --rdzv-token is not shown.
std::optional<std::string> given_twice_notice(const std::string& target, const std::vector<GivenValue>& values) {
  if (target == "--set" || target == "--help" || values.size() < 2) return std::nullopt;
  std::set<std::string> distinct;
  for (const auto& given : values) distinct.insert(given.value);
  if (distinct.size() < 2) return std::nullopt;
  const std::string count = values.size() == 2 ? "twice" : std::to_string(values.size()) + " times";
  // One option (in any of its spellings), or several that set one launch key (--grace-period, --shutdown-timeout).
  std::vector<std::string> names = {values[0].flag};
  if (const TorchrunOption* option = torchrun_option_spelled(values[0].flag)) names = names_of(option->names);
  for (const auto& f : kLaunchFlags)
    if (const auto row = names_of(f.names); std::find(row.begin(), row.end(), values[0].flag) != row.end()) names = row;
  const bool one_option = std::all_of(values.begin(), values.end(), [&](const GivenValue& given) {
    return std::find(names.begin(), names.end(), given.flag) != names.end();
  });
  if (target == "--rdzv-token") return fmt::format("--rdzv-token given {}: the last one is used", count);
  std::string list;
  for (std::size_t i = 0; i < values.size(); ++i) {
    list += i == 0 ? "" : i + 1 == values.size() ? ", then " : ", ";
    list += values[i].flag + (values[i].value.empty() ? "" : " " + values[i].value);
  }
  const GivenValue& last = values.back();
  const std::string subject = one_option ? last.flag : target;
  return fmt::format("{} given {} ({}): the last, {}, is used", subject, count, list,
                     last.flag + (last.value.empty() ? "" : " " + last.value));
}

struct LaunchSplit {
  std::vector<std::string> option_tokens;  // handed to CLI11
  std::optional<std::string> config_path;
  std::vector<std::string> bare_overrides;
  std::vector<std::string> program;       // the script/program and its arguments (no "--" form)
  std::vector<std::string> after_dashes;  // what followed "--"
  bool had_dashes = false;
};

// The torchrun personality's spelling of the flag `flag` (a suggestion for `typed`): torchrun's own name of the same
// launch key, with '_' when the user typed one ("--nproc" -> "--nproc-per-node"). mgtrain's flags that torchrun has
// no option for stay as they are (the personality accepts them too).
std::string torchrun_spelling(const std::string& flag, const std::string& typed) {
  if (torchrun_option_spelled(flag)) return flag;
  for (const auto& f : kLaunchFlags) {
    const auto names = names_of(f.names);
    if (std::find(names.begin(), names.end(), flag) == names.end()) continue;
    const TorchrunOption* option = torchrun_option_for_key(f.key);
    if (!option) return flag;
    std::string spelling;
    for (const auto& n : names_of(option->names)) {
      if (!starts_with(n, "--")) continue;
      if (spelling.empty()) spelling = n;
      if (typed.find('_') != std::string::npos && n.find('_') != std::string::npos) return n;
    }
    return spelling.empty() ? flag : spelling;
  }
  return flag;
}

// " (did you mean --x?)" for an unknown flag, in the persona's spellings.
std::string flag_suggestion(const std::string& typed, const std::vector<std::string>& known,
                            const LaunchPersona& persona) {
  const std::optional<std::string> match = closest_match(typed, known);
  if (!match) return "";
  return " (did you mean " + (persona.torchrun ? torchrun_spelling(*match, typed) : *match) + "?)";
}

// Only a "--" before the program counts: one among the program's arguments is the program's (torchrun's REMAINDER).
LaunchSplit split_launch_args(const std::vector<std::string>& args, const LaunchPersona& persona) {
  static const auto table = launch_option_table();
  LaunchSplit split;
  auto dashes = args.begin();
  for (bool option_value = false; dashes != args.end(); ++dashes) {
    const std::string& arg = *dashes;
    if (option_value) {
      option_value = false;
    } else if (arg == "--") {
      break;
    } else if (arg.size() > 1 && arg[0] == '-') {
      auto found = table.find(arg.substr(0, arg.find('=')));
      option_value = found != table.end() && found->second.takes_value && arg.find('=') == std::string::npos;
    } else if (!is_yaml_path(arg) && !looks_like_config_override(arg)) {
      dashes = args.end();  // the program: everything from here is its own
      break;
    }
  }
  split.had_dashes = dashes != args.end();
  if (split.had_dashes) split.after_dashes.assign(dashes + 1, args.end());
  std::vector<std::string> known;
  known.reserve(table.size());
  for (const auto& [name, info] : table) known.push_back(name);

  for (auto it = args.begin(); it != dashes; ++it) {
    const std::string& arg = *it;
    if (arg.size() > 1 && arg[0] == '-') {
      const std::string name = arg.substr(0, arg.find('='));
      auto found = table.find(name);
      if (found == table.end()) {
        throw CommandLineError(fmt::format("{}unknown flag {}{}\nRun '{} --help' for the flags.", persona.where, name,
                                           flag_suggestion(name, known, persona), persona.command));
      }
      split.option_tokens.push_back(arg);
      if (found->second.takes_value && arg.find('=') == std::string::npos) {
        if (it + 1 == dashes) throw CommandLineError(fmt::format("{}{} needs a value", persona.where, name));
        split.option_tokens.push_back(*++it);
      }
      continue;
    }
    if (!split.config_path && split.program.empty() && is_yaml_path(arg)) {
      split.config_path = arg;
    } else if (looks_like_config_override(arg)) {
      split.bare_overrides.push_back(arg);
    } else if (split.config_path) {
      throw CommandLineError(
          fmt::format("{}unexpected argument '{}' after {} (overrides look like KEY=VALUE, "
                      "a program goes after --)",
                      persona.where, arg, *split.config_path));
    } else {
      split.program.assign(it, dashes);  // a script or program: the rest is its own arguments
      break;
    }
  }
  return split;
}

// Collects `--set` values, the config-key flags of `launch` and torchrun's other options from a parsed CLI11
// subcommand.
struct LaunchOptions {
  std::map<std::string, std::string> values;  // canonical name -> value
  std::vector<std::string> set_overrides;
  std::map<std::string, std::string> torchrun;  // dest -> value ("1" for a flag) of torchrun's options without a key
  std::optional<std::string> rdzv_token;        // --rdzv-token: a secret, so no config key (never written to a file)
};

void add_launch_options(CLI::App& launch, LaunchOptions& opts) {
  for (const auto& f : kLaunchFlags) {
    const KeyDef* key = find_key(f.key);
    const std::string canonical = canonical_name(f.names);
    std::string help = key ? key->doc : "";
    if (key && !key->allowed_text().empty()) help += " [" + key->allowed_text() + "]";
    if (f.takes_value) {
      launch
          .add_option_function<std::string>(
              f.names, [&opts, canonical](const std::string& v) { opts.values[canonical] = v; }, help)
          ->type_name("VALUE")
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else {
      const std::string value = f.flag_value;
      if (value == "false") help = "turn off " + std::string(f.key) + ": " + help;
      // --flag=false (cli.cpp's normalize_flag_values leaves only true/false) sets the opposite value.
      const std::string opposite = value == "true" ? "false" : "true";
      launch.add_flag_function(
          f.names,
          [&opts, canonical, value, opposite](std::int64_t count) {
            opts.values[canonical] = count > 0 ? value : opposite;
          },
          help);
    }
  }
  launch
      .add_option(kRdzvTokenNames, opts.rdzv_token,
                  "multi-node: the secret every node authenticates the rendezvous with; visible to other users in the "
                  "process list, so prefer MGTRAIN_RDZV_TOKEN or --rdzv-token-file (docs/multinode.md)")
      ->type_name("SECRET")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  launch.add_option("--set", opts.set_overrides, "set any config key: --set train.batch_size=32 (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  for (const auto& option : torchrun_options()) {
    if (option.key) continue;
    const std::string dest = option.dest;
    const std::string help = option.help;
    if (option.store_true) {
      launch.add_flag_function(
          option.names,
          [&opts, dest](std::int64_t count) {
            if (count > 0) {
              opts.torchrun[dest] = "1";
            } else {
              opts.torchrun.erase(dest);  // --no-python=false: as if not given
            }
          },
          help);
    } else {
      launch
          .add_option_function<std::string>(
              option.names, [&opts, dest](const std::string& v) { opts.torchrun[dest] = v; }, help)
          ->type_name("VALUE")
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
  }
}

// The spelling the user typed for an option spec ("--nproc,--nproc_per_node"), for error messages.
std::string typed_spelling(const std::vector<std::string>& tokens, const std::string& spec) {
  for (const auto& token : tokens) {
    std::string name = token.substr(0, token.find('='));
    for (const auto& n : names_of(spec))
      if (n == name) return name;
  }
  return canonical_name(spec);
}

// The flags as config settings and torchrun extras, then the PET_* variables for what no flag gave.
// The torchrun personality holds each value of a torchrun option to torchrun's argparse first (check_as_argparse).
void add_settings(const LaunchSplit& split, const LaunchOptions& opts, const EnvMap& env, const LaunchPersona& persona,
                  LaunchRequest& request, TorchrunExtras& extras) {
  std::set<std::string> given_keys, given_dests;
  std::vector<FlagSetting> key_flags;
  // A key set by two flags (--grace-period, --shutdown-timeout): the one given last wins, as for one flag given twice.
  std::vector<std::pair<std::size_t, FlagSetting>> placed;
  const std::map<std::string, std::vector<GivenValue>> given = given_values(split.option_tokens);
  for (const auto& f : kLaunchFlags) {
    auto it = opts.values.find(canonical_name(f.names));
    if (it == opts.values.end()) continue;
    const std::string spelling = typed_spelling(split.option_tokens, f.names);
    const ValueSource source{spelling, spelling + " " + it->second};
    std::string value = it->second;
    if (const TorchrunOption* option = torchrun_option_spelled(spelling); option && persona.torchrun) {
      value = check_as_argparse(*option, source, value, false);
    }
    if (const TorchrunOption* option = torchrun_option_for_key(f.key); option && option->apply) {
      TorchrunExtras unused;
      option->apply(source, value, unused);
    }
    std::size_t place = 0;  // where this row's flag was given last
    const std::vector<std::string> names = names_of(f.names);
    if (const auto values = given.find(f.key); values != given.end()) {
      for (const GivenValue& earlier : values->second)
        if (std::find(names.begin(), names.end(), earlier.flag) != names.end()) place = earlier.position;
    }
    placed.emplace_back(place, FlagSetting{f.key, value, spelling, "", source.where});
    given_keys.insert(f.key);
  }
  std::stable_sort(placed.begin(), placed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  key_flags.reserve(placed.size());
  for (auto& [place, setting] : placed) key_flags.push_back(std::move(setting));
  if (!persona.torchrun) {
    for (const auto& [target, values] : given)
      if (auto notice = given_twice_notice(target, values)) request.notices.push_back(*notice);
  }
  for (const auto& option : torchrun_options()) {
    auto it = opts.torchrun.find(option.dest);
    if (option.key || it == opts.torchrun.end()) continue;
    const std::string spelling = typed_spelling(split.option_tokens, option.names);
    const ValueSource source{spelling, option.store_true ? spelling : spelling + " " + it->second};
    option.apply(source, persona.torchrun ? check_as_argparse(option, source, it->second, false) : it->second, extras);
    given_dests.insert(option.dest);
  }
  // --rdzv-conf's settings come before the key flags, so that e.g. --join-timeout wins over its join_timeout.
  request.config.flags = std::move(extras.settings);
  extras.settings.clear();
  request.config.flags.insert(request.config.flags.end(), key_flags.begin(), key_flags.end());

  TorchrunExtras from_env;
  read_pet_variables(env, given_keys, given_dests, request.config.environment, from_env, persona.torchrun);
  request.config.environment.insert(request.config.environment.begin(), from_env.settings.begin(),
                                    from_env.settings.end());
  if (!persona.torchrun) {
    for (auto* notices : {&extras.notices, &from_env.notices})
      request.notices.insert(request.notices.end(), notices->begin(), notices->end());
  }
  extras.module = extras.module || from_env.module;
  extras.no_python = extras.no_python || from_env.no_python;
  extras.run_path = extras.run_path || from_env.run_path;
  if (!extras.log_line_prefix_template) extras.log_line_prefix_template = from_env.log_line_prefix_template;
}

// How the program runs: a .py script (or any with --run-path) and -m under launch.python, else itself.
// After `--` (`verbatim`) only -m and --run-path put it under launch.python.
void set_program(const std::vector<std::string>& program, const TorchrunExtras& extras, bool verbatim,
                 const LaunchPersona& persona, LaunchRequest& request) {
  const std::string& first = program.front();
  const bool python_script = !verbatim && first.size() > 3 && ends_with(first, ".py");
  if (extras.module && extras.run_path) throw UsageError(persona.where + "-m and --run-path cannot be combined");
  if (extras.module && extras.no_python) throw UsageError(persona.where + "-m and --no-python cannot be combined");
  // torchrun: --run-path wins over --no-python.
  if (extras.module || extras.run_path || (python_script && !extras.no_python)) {
    // The interpreter is launch.python, known only once the config is loaded.
    request.run_under_python = true;
    request.command.push_back("-u");
    if (extras.module) request.command.push_back("-m");
  }
  request.command.insert(request.command.end(), program.begin(), program.end());
}

LaunchRequest build_launch_request(const LaunchSplit& split, const LaunchOptions& opts, const EnvMap& env,
                                   const LaunchPersona& persona) {
  LaunchRequest request;
  request.config.path = split.config_path;
  request.config.overrides = opts.set_overrides;
  request.config.overrides.insert(request.config.overrides.end(), split.bare_overrides.begin(),
                                  split.bare_overrides.end());
  TorchrunExtras extras;
  add_settings(split, opts, env, persona, request, extras);
  request.log_line_prefix_template = extras.log_line_prefix_template;
  request.duplicate_stdout_filters = extras.duplicate_stdout_filters;
  request.duplicate_stderr_filters = extras.duplicate_stderr_filters;
  request.rdzv_token = opts.rdzv_token;
  if (split.had_dashes) {
    if (split.after_dashes.empty())
      throw CommandLineError(persona.where + "nothing follows --; give the program to run, e.g. -- python3 train.py");
    set_program(split.after_dashes, extras, true, persona, request);
    return request;
  }
  if (split.program.empty()) {
    if (!split.config_path && split.bare_overrides.empty() && opts.set_overrides.empty()) {
      if (persona.torchrun) {
        throw CommandLineError(fmt::format(
            "{}the following arguments are required: training_script (e.g. {} --nproc-per-node 2 train.py)\n"
            "Run '{} --help' for usage.",
            persona.where, persona.command, persona.command));
      }
      throw CommandLineError(
          "launch: give a config (mgtrain launch --nproc 2 configs/fashion_mnist_cnn.yaml) "
          "or a program (mgtrain launch --nproc 2 -- python3 train.py)");
    }
    if (extras.module || extras.no_python || extras.run_path) {
      throw CommandLineError(
          persona.where +
          "-m/--no-python/--run-path (or PET_MODULE/PET_NO_PYTHON/PET_RUN_PATH) apply to a program, and none was "
          "given");
    }
    return request;
  }
  set_program(split.program, extras, false, persona, request);
  return request;
}

class Launch final : public LaunchSubcommand {
 public:
  Launch(CLI::App& app, EnvMap env, LaunchPersona persona)
      : cmd_(app.add_subcommand("launch", "spawn and supervise one worker per rank")),
        env_(std::move(env)),
        persona_(std::move(persona)) {
    cmd_->footer(kLaunchFooter);
    add_launch_options(*cmd_, opts_);
  }
  std::vector<std::string> split_arguments(const std::vector<std::string>& args) override {
    split_ = split_launch_args(args, persona_);
    return split_.option_tokens;
  }
  std::optional<CliRequest> request() override {
    if (!cmd_->parsed()) return std::nullopt;
    return build_launch_request(split_, opts_, env_, persona_);
  }

 private:
  CLI::App* cmd_;
  EnvMap env_;
  LaunchPersona persona_;
  LaunchOptions opts_;
  LaunchSplit split_;
};

}  // namespace

LaunchPersona launch_persona(bool torchrun, bool as_torchrun) {
  if (!torchrun) return {};
  if (as_torchrun) return {true, "torchrun", ""};
  return {true, "mgtrain torchrun", "torchrun: "};
}

std::unique_ptr<LaunchSubcommand> add_launch(CLI::App& app, const EnvMap& env, const LaunchPersona& persona) {
  return std::make_unique<Launch>(app, env, persona);
}

}  // namespace mgtrain::cli_detail
