// Parses `mgtrain` command lines into CliRequest values with CLI11 (see cli.hpp): the dispatcher. Each
// subcommand registers its own options and builds its request (subcommands.hpp: `launch` in cli_launch.cpp,
// the others in cli_subcommands.cpp); here are the top-level flags, the subcommand check and parse errors.
#include "cli/cli.hpp"

#include <algorithm>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/help_formatter.hpp"
#include "cli/help_layout.hpp"
#include "cli/subcommands.hpp"
#include "cli/torchrun_help.hpp"
#include "cli/torchrun_options.hpp"
#include "util/build_info.hpp"
#include "util/did_you_mean.hpp"
#include "util/error.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace cli_detail {

bool looks_like_override(const std::string& arg) {
  auto eq = arg.find('=');
  return eq != std::string::npos && eq > 0 && arg[0] != '-';
}

}  // namespace cli_detail

namespace {

using cli_detail::Subcommand;

const char* kTopFooter = R"(Examples:
  mgtrain launch --nproc 2 configs/fashion_mnist_cnn.yaml
  mgtrain launch --nproc 4 configs/fashion_mnist_cnn.yaml train.batch_size=128
  mgtrain launch --nproc 2 -- python3 train.py --lr 0.1
  mgtrain torchrun --nproc-per-node 2 train.py   (as torchrun 2.x: its exit codes, console, defaults)
  mgtrain config show configs/fashion_mnist_cnn.yaml --set train.batch_size=32
  mgtrain env
  mgtrain export runs/RUN/checkpoints/checkpoint-step000001000.safetensors --format torchscript

Exit codes: 0 success, 2 usage or config error, 130/143 interrupted/terminated,
otherwise the exit code of the worker that failed first (128+N when killed by signal N).
Docs: README.md, docs/config.md, docs/launch.md, docs/exit-codes.md)";

std::string version_text() {
  return fmt::format("mgtrain {} ({} build, {})", build_info::kVersion, build_info::kBuildType, build_info::kCompiler);
}

// An unknown first word is an error naming the subcommands (flags such as --help go on to CLI11).
void check_subcommand(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty()) throw CommandLineError("no subcommand given; use one of: launch, config, env\n\n" + app.help());
  if (args[0].empty() || args[0][0] != '-') {
    const std::vector<std::string> subcommands = {"launch", "torchrun", "config", "env",   "tokenize",
                                                  "export", "runs",     "plot",   "status"};
    if (std::find(subcommands.begin(), subcommands.end(), args[0]) == subcommands.end()) {
      throw CommandLineError(
          fmt::format("unknown subcommand '{}'{}; use one of: launch, torchrun, config, env, tokenize, export, runs, "
                      "plot, status (mgtrain --help)",
                      args[0], did_you_mean_suffix(args[0], subcommands)));
    }
  }
}

// How messages about the (sub)subcommand `path` ("launch", "config show") start, and the command whose --help they
// point at: `launch` speaks as the persona (the torchrun personality's messages name torchrun).
struct MessageNames {
  std::string where;    // "config show: "
  std::string command;  // "mgtrain config show"
};

MessageNames message_names(const std::string& path, const cli_detail::LaunchPersona& persona) {
  if (path == "launch") return {persona.where, persona.command};
  if (path.empty()) return {"", "mgtrain"};
  return {path + ": ", "mgtrain " + path};
}

// A CLI11 parse error as a CommandLineError naming the (sub)subcommand it happened in.
CommandLineError parse_error(const CLI::App& app, const CLI::ParseError& e, const cli_detail::LaunchPersona& persona) {
  std::string path;
  for (auto* sub = app.get_subcommands().empty() ? nullptr : app.get_subcommands().front(); sub;
       sub = sub->get_subcommands().empty() ? nullptr : sub->get_subcommands().front()) {
    path += (path.empty() ? "" : " ") + sub->get_name();
  }
  const MessageNames names = message_names(path, persona);
  return CommandLineError(fmt::format("{}{}\nRun '{} --help' for usage.", names.where, e.what(), names.command));
}

// The subcommand (or `config`'s sub-subcommand) named `name` of `app`, or nullptr.
CLI::App* find_subcommand(CLI::App& app, const std::string& name) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (!sub->get_name().empty() && sub->check_name(name)) return sub;
  return nullptr;
}

// A flag (an option that takes no value) written --flag=VALUE: VALUE must be a boolean (value_parsing's parse_bool,
// so " yes" and "ON" too), and the token becomes --flag=true or --flag=false. Anything else is a UsageError naming the
// flag and the accepted values (a CommandLineError: torchrun's argparse refuses --flag=VALUE): CLI11 would count "5" as
// five flags, and throw std::invalid_argument ("internal error") for "x" or "abc". Tokens after "--" belong to a
// program, and a value of an option is never a flag.
void normalize_flag_values(CLI::App& app, std::vector<std::string>& tokens, const cli_detail::LaunchPersona& persona) {
  CLI::App* command = &app;
  std::string where;
  bool value_next = false;
  for (auto& token : tokens) {
    if (token == "--") break;
    if (value_next) {
      value_next = false;
      continue;
    }
    if (token.size() < 2 || token[0] != '-') {
      if (CLI::App* sub = find_subcommand(*command, token)) {
        command = sub;
        where += (where.empty() ? "" : " ") + token;
      }
      continue;
    }
    const auto eq = token.find('=');
    const std::string name = token.substr(0, eq);
    const CLI::Option* option = command->get_option_no_throw(name);
    if (!option) continue;  // CLI11 reports it
    if (option->get_expected_max() != 0) {
      value_next = eq == std::string::npos;
      continue;
    }
    if (eq == std::string::npos) continue;
    const std::string value = token.substr(eq + 1);
    if (persona.torchrun && cli_detail::torchrun_option_spelled(name)) {  // argparse: "ignored explicit argument"
      throw CommandLineError(
          fmt::format("{}{} takes no value, so {} is refused (torchrun's parser refuses it too)\n"
                      "Run '{} --help' for usage.",
                      persona.where, name, token, persona.command));
    }
    const std::optional<bool> flag = parse_bool(value);
    if (!flag) {
      const MessageNames names = message_names(where, persona);
      throw CommandLineError(
          fmt::format("{}{} is a flag: give it alone, or as {}=true or {}=false (also yes/no, on/off, 1/0), not '{}'\n"
                      "Run '{} --help' for usage.",
                      names.where, name, name, name, value, names.command));
    }
    token = name + (*flag ? "=true" : "=false");
  }
}

}  // namespace

CliRequest parse_cli(const std::vector<std::string>& args) { return parse_cli(args, EnvMap{}); }

CliRequest parse_cli(const std::vector<std::string>& args, const EnvMap& env) {
  return parse_cli(args, env, CliInvocation{});
}

CliRequest parse_cli(const std::vector<std::string>& args, const EnvMap& env, const CliInvocation& invocation) {
  const std::size_t width = cli_detail::help_width(env, invocation.terminal_columns);
  CLI::App app{"mgtrain: launch and supervise distributed training (a faster, safer drop-in for torchrun)", "mgtrain"};
  app.formatter(cli_detail::wrapping_formatter(width));  // before the subcommands: they take the app's formatter
  app.footer(kTopFooter);
  app.require_subcommand(1);
  bool want_version = false;
  app.add_flag("--version", want_version, "print the version and exit");

  // `mgtrain torchrun ARGS` (and the binary invoked as `torchrun`, apps/mgtrain/main.cpp) is `launch` in torchrun's
  // personality: its own help, and messages that speak torchrun.
  const bool torchrun = !args.empty() && args[0] == "torchrun";
  const cli_detail::LaunchPersona persona = cli_detail::launch_persona(torchrun, invocation.as_torchrun);

  // Registration order is the order of `mgtrain --help`.
  std::unique_ptr<cli_detail::LaunchSubcommand> launch = cli_detail::add_launch(app, env, persona);
  std::vector<std::unique_ptr<Subcommand>> subcommands = cli_detail::add_config(app);
  for (auto add : {cli_detail::add_env, cli_detail::add_tokenize, cli_detail::add_export, cli_detail::add_runs,
                   cli_detail::add_plot, cli_detail::add_status})
    subcommands.push_back(add(app));

  // `launch` arguments are split by hand; everything else goes to CLI11 as is.
  std::vector<std::string> tokens = args;
  if (!args.empty() && (args[0] == "launch" || torchrun)) {
    tokens = {"launch"};
    for (auto& token : launch->split_arguments(std::vector<std::string>(args.begin() + 1, args.end())))
      tokens.push_back(std::move(token));
  }
  check_subcommand(app, args);
  normalize_flag_values(app, tokens, persona);

  try {
    std::vector<std::string> reversed(tokens.rbegin(), tokens.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    if (torchrun) return PrintRequest{cli_detail::torchrun_help(persona.command, width)};
    return PrintRequest{app.help()};
  } catch (const CLI::CallForAllHelp&) {
    return PrintRequest{app.help("", CLI::AppFormatMode::All)};
  } catch (const CLI::ParseError& e) {
    if (want_version) return PrintRequest{version_text() + "\n"};
    throw parse_error(app, e, persona);
  }
  if (want_version) return PrintRequest{version_text() + "\n"};

  if (auto request = launch->request()) {
    if (auto* run = std::get_if<LaunchRequest>(&*request); run && torchrun)
      run->config.personality = Personality::Torchrun;
    return *request;
  }
  for (auto& subcommand : subcommands) {
    std::optional<CliRequest> request = subcommand->request();
    if (!request) continue;
    // `config show/validate` show and check what `launch` would run: with the PET_* variables.
    if (auto* show = std::get_if<ConfigShowRequest>(&*request))
      show->config.environment = cli_detail::pet_settings(env);
    if (auto* check = std::get_if<ConfigValidateRequest>(&*request))
      check->config.environment = cli_detail::pet_settings(env);
    return *request;
  }
  throw CommandLineError("give a subcommand (launch, config, env); see mgtrain --help");
}

}  // namespace mgtrain
