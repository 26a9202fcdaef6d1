// Parses `mgtrain` command lines into CliRequest values with CLI11 (see cli.hpp).
// `launch` arguments are pre-split by hand first: flags, then the config or program, then what follows
// the program belongs to the program (torchrun's semantics), so CLI11 only ever sees flags.
#include "cli/cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "util/build_info.hpp"
#include "config/config_schema.hpp"
#include "util/did_you_mean.hpp"
#include "util/error.hpp"
#include "config/starter_config.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

// A `mgtrain launch` flag that sets a config key. Help text comes from the schema.
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
    {"--gpu-ids,--gpu_ids", "launch.gpu_ids", true},
    {"--grace-period,--grace_period", "launch.grace_period", true},
    {"--standalone", "launch.standalone", false},
    {"--slurm", "launch.slurm", true},
    {"--no-requeue,--no_requeue", "launch.slurm_requeue", false, "false"},
    {"--heartbeat-timeout,--heartbeat_timeout", "launch.heartbeat_timeout", true},
    {"--worker", "launch.worker", true},
    {"--python", "launch.python", true},
    {"--rdzv-endpoint,--rdzv_endpoint", "launch.rdzv_endpoint", true},
    {"--rdzv-backend,--rdzv_backend", "launch.rdzv_backend", true},
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
};

// The spellings of a CLI11 option spec: "--nproc,--nproc_per_node" -> {"--nproc", "--nproc_per_node"}.
std::vector<std::string> names_of(const std::string& spec) { return split(spec, ','); }

std::string canonical_name(const std::string& spec) {
  for (const auto& n : names_of(spec))
    if (n.rfind("--", 0) == 0) return n;
  return names_of(spec).front();
}

bool is_yaml_path(const std::string& arg) {
  auto ends_with = [&](const char* suffix) {
    std::string s(suffix);
    return arg.size() > s.size() && arg.compare(arg.size() - s.size(), s.size(), s) == 0;
  };
  return ends_with(".yaml") || ends_with(".yml");
}

bool looks_like_override(const std::string& arg) {
  auto eq = arg.find('=');
  return eq != std::string::npos && eq > 0 && arg[0] != '-';
}

// "train.epochs=3": a KEY=VALUE whose key is a dotted config path (a program's "a=b" argument is not).
bool looks_like_config_override(const std::string& arg) {
  const auto eq = arg.find('=');
  if (!looks_like_override(arg)) return false;
  const std::string key = arg.substr(0, eq);
  return key.find('.') != std::string::npos && key.find('/') == std::string::npos;
}

const char* kTopFooter = R"(Examples:
  mgtrain launch --nproc 2 configs/fashion_mnist_cnn.yaml
  mgtrain launch --nproc 4 configs/fashion_mnist_cnn.yaml train.batch_size=128
  mgtrain launch --nproc 2 -- python3 train.py --lr 0.1
  mgtrain config show configs/fashion_mnist_cnn.yaml --set train.batch_size=32
  mgtrain env
  mgtrain export runs/RUN/checkpoints/checkpoint-step000001000.safetensors --format torchscript

Exit codes: 0 success, 2 usage or config error, 130/143 interrupted/terminated,
otherwise the exit code of the worker that failed first (128+N when killed by signal N).
Docs: README.md, docs/config.md, docs/launch.md, docs/exit-codes.md)";

const char* kLaunchFooter = R"(The config's launch: section, MGTRAIN_LAUNCH_* variables and --set launch.KEY=VALUE set the
same values; a flag wins over all of them. torchrun's spellings are accepted as aliases.

Forms:
  mgtrain launch [FLAGS] CONFIG.yaml [KEY=VALUE ...]     built-in trainer, one mgtrain-worker per rank
  mgtrain launch [FLAGS] KEY=VALUE ...                    built-in trainer on the defaults plus overrides
  mgtrain launch [FLAGS] [CONFIG.yaml] -- COMMAND [ARGS]  any program, e.g. -- python3 train.py
  mgtrain launch [FLAGS] train.py [ARGS]                  a .py script runs under launch.python
                                                          (--no-python runs it directly; -m: a module)
In COMMAND's arguments ${local_rank} is replaced per worker.

Examples:
  mgtrain launch --nproc 2 configs/fashion_mnist_cnn.yaml
  mgtrain launch --nproc 4 --max-restarts 3 configs/fashion_mnist_cnn.yaml optim.lr=0.05
  mgtrain launch --nnodes 2 --node-rank 0 --master-addr node0 --master-port 29500 --nproc 8 cfg.yaml
  mgtrain launch --nnodes 1:4 --rdzv-endpoint node0:29400 --rdzv-id job7 --nproc 8 cfg.yaml   (elastic)
  mgtrain launch --hosts node0:8,node1:8 cfg.yaml           (one agent per host over ssh; docs/multinode.md)
  mgtrain launch --nproc_per_node 2 train.py --epochs 3        (a torchrun command line, one word changed))";

// Everything `launch` needs to know about an option token during the pre-split.
struct OptionInfo {
  bool takes_value;
};

std::map<std::string, OptionInfo> launch_option_table() {
  std::map<std::string, OptionInfo> table;
  for (const auto& f : kLaunchFlags)
    for (const auto& n : names_of(f.names)) table[n] = {f.takes_value};
  for (const char* n : {"--set", "--monitor-interval", "--monitor_interval", "--start-method", "--start_method"})
    table[n] = {true};
  for (const char* n : {"--no-python", "--no_python", "-m", "--module", "-h", "--help"}) table[n] = {false};
  return table;
}

struct LaunchSplit {
  std::vector<std::string> option_tokens;  // handed to CLI11
  std::optional<std::string> config_path;
  std::vector<std::string> bare_overrides;
  std::vector<std::string> program;        // the script/program and its arguments (no "--" form)
  std::vector<std::string> after_dashes;   // what followed "--"
  bool had_dashes = false;
};

LaunchSplit split_launch_args(const std::vector<std::string>& args) {
  static const auto table = launch_option_table();
  LaunchSplit split;
  auto dashes = std::find(args.begin(), args.end(), "--");
  split.had_dashes = dashes != args.end();
  if (split.had_dashes) split.after_dashes.assign(dashes + 1, args.end());
  std::vector<std::string> known;
  for (const auto& [name, info] : table) known.push_back(name);

  for (auto it = args.begin(); it != dashes; ++it) {
    const std::string& arg = *it;
    if (arg.size() > 1 && arg[0] == '-') {
      const std::string name = arg.substr(0, arg.find('='));
      auto found = table.find(name);
      if (found == table.end()) {
        throw UsageError(fmt::format("launch: unknown flag {}{}\nRun 'mgtrain launch --help' for the flags.", name,
                                     did_you_mean_suffix(name, known)));
      }
      split.option_tokens.push_back(arg);
      if (found->second.takes_value && arg.find('=') == std::string::npos) {
        if (it + 1 == dashes) throw UsageError(fmt::format("launch: {} needs a value", name));
        split.option_tokens.push_back(*++it);
      }
      continue;
    }
    if (!split.config_path && split.program.empty() && is_yaml_path(arg)) {
      split.config_path = arg;
    } else if (looks_like_config_override(arg)) {
      split.bare_overrides.push_back(arg);
    } else if (split.config_path) {
      throw UsageError(fmt::format("launch: unexpected argument '{}' after {} (overrides look like KEY=VALUE, "
                                   "a program goes after --)", arg, *split.config_path));
    } else {
      split.program.assign(it, dashes);  // a script or program: the rest is its own arguments
      break;
    }
  }
  return split;
}

// Collects `--set` values and the config-key flags of `launch` from a parsed CLI11 subcommand.
struct LaunchOptions {
  std::map<std::string, std::string> values;  // canonical name -> value
  std::map<std::string, std::string> spelled;  // canonical name -> what the user typed
  std::vector<std::string> set_overrides;
  bool no_python = false;
  bool module = false;
  std::string ignored;
};

void add_launch_options(CLI::App& launch, LaunchOptions& opts) {
  for (const auto& f : kLaunchFlags) {
    const KeyDef* key = find_key(f.key);
    const std::string canonical = canonical_name(f.names);
    std::string help = key ? key->doc : "";
    if (key && !key->allowed_text().empty()) help += " [" + key->allowed_text() + "]";
    if (f.takes_value) {
      launch.add_option_function<std::string>(
                f.names, [&opts, canonical](const std::string& v) { opts.values[canonical] = v; }, help)
          ->type_name("VALUE");
    } else {
      const std::string value = f.flag_value;
      if (value == "false") help = "turn off " + std::string(f.key) + ": " + help;
      launch.add_flag_function(
          f.names, [&opts, canonical, value](std::int64_t) { opts.values[canonical] = value; }, help);
    }
  }
  launch.add_option("--set", opts.set_overrides, "set any config key: --set train.batch_size=32 (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  launch.add_flag("--no-python,--no_python", opts.no_python, "run the script directly, not under launch.python");
  launch.add_flag("-m,--module", opts.module, "the program is a Python module: python3 -m MODULE");
  launch.add_option("--monitor-interval,--monitor_interval,--start-method,--start_method", opts.ignored,
                    "accepted for torchrun compatibility; no effect (mgtrain is event-driven)")
      ->type_name("VALUE");
}

std::string typed_spelling(const std::vector<std::string>& tokens, const std::string& canonical) {
  // The spelling the user typed for a canonical flag, for error messages.
  for (const auto& f : kLaunchFlags) {
    if (canonical_name(f.names) != canonical) continue;
    for (const auto& token : tokens) {
      std::string name = token.substr(0, token.find('='));
      for (const auto& n : names_of(f.names))
        if (n == name) return name;
    }
  }
  return canonical;
}

LaunchRequest build_launch_request(const LaunchSplit& split, const LaunchOptions& opts) {
  LaunchRequest request;
  request.config.path = split.config_path;
  request.config.overrides = opts.set_overrides;
  request.config.overrides.insert(request.config.overrides.end(), split.bare_overrides.begin(), split.bare_overrides.end());
  for (const auto& f : kLaunchFlags) {
    const std::string canonical = canonical_name(f.names);
    auto it = opts.values.find(canonical);
    if (it != opts.values.end()) request.config.flags.push_back({f.key, it->second, typed_spelling(split.option_tokens, canonical)});
  }
  if (split.had_dashes && !split.program.empty()) {
    throw UsageError(fmt::format("launch: give the program either after -- or in place of the config, not both ('{}' and '{}')",
                                 split.program.front(), split.after_dashes.empty() ? "" : split.after_dashes.front()));
  }
  if (split.had_dashes) {
    if (split.after_dashes.empty()) throw UsageError("launch: nothing follows --; give the program to run, e.g. -- python3 train.py");
    request.command = split.after_dashes;
    return request;
  }
  if (split.program.empty()) {
    if (!split.config_path && split.bare_overrides.empty() && opts.set_overrides.empty()) {
      throw UsageError("launch: give a config (mgtrain launch --nproc 2 configs/fashion_mnist_cnn.yaml) "
                       "or a program (mgtrain launch --nproc 2 -- python3 train.py)");
    }
    if (opts.module || opts.no_python) throw UsageError("launch: -m/--no-python apply to a program, and none was given");
    return request;
  }
  const std::string& first = split.program.front();
  const bool python_script = first.size() > 3 && first.compare(first.size() - 3, 3, ".py") == 0;
  if (opts.module && opts.no_python) throw UsageError("launch: -m and --no-python cannot be combined");
  if (opts.module || (python_script && !opts.no_python)) {
    // The interpreter is launch.python, known only once the config is loaded.
    request.run_under_python = true;
    request.command.push_back("-u");
    if (opts.module) request.command.push_back("-m");
  }
  request.command.insert(request.command.end(), split.program.begin(), split.program.end());
  return request;
}

// Splits `config show/validate` positionals into the config path and KEY=VALUE overrides.
void take_config_positionals(const std::vector<std::string>& positionals, ConfigRequest& request, const char* sub) {
  for (const auto& arg : positionals) {
    if (!request.path && !looks_like_override(arg)) {
      request.path = arg;
    } else if (looks_like_override(arg)) {
      request.overrides.push_back(arg);
    } else {
      throw UsageError(fmt::format("config {}: unexpected argument '{}' (overrides look like KEY=VALUE)", sub, arg));
    }
  }
}

std::string version_text() {
  return fmt::format("mgtrain {} ({} build, {})", build_info::kVersion, build_info::kBuildType, build_info::kCompiler);
}

}  // namespace

CliRequest parse_cli(const std::vector<std::string>& args) {
  CLI::App app{"mgtrain: launch and supervise distributed training (a faster, safer drop-in for torchrun)", "mgtrain"};
  app.footer(kTopFooter);
  app.require_subcommand(1);
  bool want_version = false;
  app.add_flag("--version", want_version, "print the version and exit");

  // launch
  CLI::App* launch = app.add_subcommand("launch", "spawn and supervise one worker per rank");
  launch->footer(kLaunchFooter);
  LaunchOptions launch_opts;
  add_launch_options(*launch, launch_opts);

  // config
  CLI::App* config = app.add_subcommand("config", "show, check or create a config file");
  config->require_subcommand(1);
  std::vector<std::string> show_positionals, show_sets, validate_positionals, validate_sets;
  ConfigShowRequest show;
  CLI::App* show_cmd = config->add_subcommand("show", "print the merged, validated config as YAML (what will run)");
  show_cmd->add_option("args", show_positionals, "CONFIG.yaml and KEY=VALUE overrides")->type_name("");
  show_cmd->add_option("--set", show_sets, "set a key: --set train.batch_size=32 (repeatable)")->type_name("KEY=VALUE")->allow_extra_args(false);
  show_cmd->add_flag("--show-origin", show.show_origin, "annotate each value with where it came from");
  show_cmd->footer("Example:\n  mgtrain config show configs/fashion_mnist_cnn.yaml --set train.batch_size=32 --show-origin");
  CLI::App* validate_cmd = config->add_subcommand("validate", "check a config and its overrides; exit 2 naming the first problem");
  validate_cmd->add_option("args", validate_positionals, "CONFIG.yaml and KEY=VALUE overrides")->type_name("");
  validate_cmd->add_option("--set", validate_sets, "set a key (repeatable)")->type_name("KEY=VALUE")->allow_extra_args(false);
  ConfigInitRequest init;
  std::map<std::string, std::string> init_answers;
  CLI::App* init_cmd = config->add_subcommand("init", "write a commented starter config (asks questions on a terminal)");
  init_cmd->add_option("path", init.path, "file to write (default mgtrain.yaml)");
  init_cmd->add_flag("--force", init.force, "overwrite an existing file");
  bool non_interactive = false;
  init_cmd->add_flag("-y,--yes,--non-interactive", non_interactive, "do not ask; unanswered questions take their defaults");
  for (const auto& q : init_questions()) {
    std::string key = q.key;
    init_cmd->add_option_function<std::string>(q.flag, [&init_answers, key](const std::string& v) { init_answers[key] = v; }, q.question)
        ->type_name("VALUE");
  }
  init_cmd->footer("Example:\n  mgtrain config init my.yaml --nproc 4 --model cnn --dataset mnist --yes");
  config->add_subcommand("docs", "print the config reference (docs/config.md) generated from the schema");

  // env
  EnvRequest env;
  CLI::App* env_cmd = app.add_subcommand("env", "print versions, build options, GPUs, cores, hostname and network interfaces");
  env_cmd->add_flag("--json", env.json, "machine-readable output");

  // tokenize
  TokenizeRequest tokenize;
  CLI::App* tokenize_cmd = app.add_subcommand("tokenize", "turn a text file into token files for the `tokens` data set");
  tokenize_cmd->add_option("text", tokenize.input, "the text file")->required();
  tokenize_cmd->add_option("out_dir", tokenize.output_dir, "directory for train.bin, val.bin and meta.json")->required();
  tokenize_cmd->add_option("--level", tokenize.level, "char (vocabulary = the text's characters) or byte (256 ids)")
      ->check(CLI::IsMember({"char", "byte"}));
  tokenize_cmd->add_option("--val-fraction", tokenize.val_fraction, "last fraction of the tokens that goes to val.bin (0: none)")
      ->check(CLI::Range(0.0, 0.99));
  tokenize_cmd->footer("Example:\n  mgtrain tokenize input.txt data/shakespeare_char\n"
                       "  mgtrain launch --nproc 2 configs/tokens_gpt.yaml data.path=data/shakespeare_char/train.bin");

  // export
  ExportRequest export_request;
  CLI::App* export_cmd = app.add_subcommand("export", "write a checkpoint's model as safetensors (for Python) or TorchScript");
  export_cmd->add_option("checkpoint", export_request.checkpoint, "the checkpoint file (checkpoint-step*.safetensors)")->required();
  export_cmd->add_option("--format", export_request.format,
                         "safetensors: the weights, named like the model's parameters (default); torchscript: a module for "
                         "torch.jit.load (runs mgtrain-worker)")
      ->check(CLI::IsMember({"safetensors", "torchscript"}));
  export_cmd->add_option("-o,--output", export_request.output,
                         "file to write (default: next to the checkpoint, <stem>.model.safetensors or <stem>.torchscript.pt)");
  export_cmd->add_flag("--force", export_request.force, "overwrite an existing output file");
  export_cmd->footer("Examples:\n  mgtrain export runs/r1/checkpoints/checkpoint-step000001000.safetensors\n"
                     "  mgtrain export runs/r1/checkpoints/checkpoint-step000001000.safetensors --format torchscript -o model.pt\n"
                     "In Python: safetensors.torch.load_file(OUT) gives the state_dict; torch.jit.load(OUT) the module.\n"
                     "Docs: docs/checkpoints.md#export");

  // runs, plot (docs/monitoring.md)
  RunsRequest runs_request;
  CLI::App* runs_cmd = app.add_subcommand("runs", "list past runs: id, status, start, duration, steps, best metric (newest first)");
  runs_cmd->add_option("--log-dir,--log_dir", runs_request.log_dir, "where run directories are (default: $MGTRAIN_LAUNCH_LOG_DIR, else runs)");
  runs_cmd->add_flag("--json", runs_request.json, "machine-readable output (one JSON array)");
  runs_cmd->footer("Example:\n  mgtrain runs --log-dir runs\nDocs: docs/monitoring.md#run-history");
  PlotRequest plot_request;
  CLI::App* plot_cmd = app.add_subcommand("plot", "draw a metric's curves of one or more runs as PNG or SVG (runs mgtrain-plot)");
  plot_cmd->add_option("runs", plot_request.runs, "run ids under the log directory, or run directory paths")->required();
  plot_cmd->add_option("--metric", plot_request.metric, "loss (default), lr, samples_per_s, eval.loss, eval.accuracy, ... (any column of metrics.jsonl)");
  plot_cmd->add_option("-o,--output", plot_request.output, "the image: .png or .svg (default: <metric>.png here)");
  plot_cmd->add_option("--log-dir,--log_dir", plot_request.log_dir, "where run directories are (default: $MGTRAIN_LAUNCH_LOG_DIR, else runs)");
  plot_cmd->footer("Examples:\n  mgtrain plot r1 r2 --metric eval.accuracy -o accuracy.svg\n  mgtrain plot runs/r1 -o loss.png\n"
                   "Docs: docs/monitoring.md#plots");

  // status (docs/monitoring.md#status-api-and-dashboard)
  StatusRequest status_request;
  CLI::App* status_cmd = app.add_subcommand("status", "a run's ranks, steps, losses, CPU and GPUs, live from its launcher's status API");
  status_cmd->add_option("run", status_request.run, "run id under the log directory, or a run directory (default: the newest run)");
  status_cmd->add_option("--log-dir,--log_dir", status_request.log_dir, "where run directories are (default: $MGTRAIN_LAUNCH_LOG_DIR, else runs)");
  status_cmd->add_flag("--json", status_request.json, "the /status JSON as the launcher serves it");
  status_cmd->footer("The launcher serves it with --status-port PORT (launch.status_port); without a live launcher the\n"
                     "command says so and shows what the run's files say.\nExamples:\n  mgtrain status\n  mgtrain status my-run --json\n"
                     "Docs: docs/monitoring.md#status-api-and-dashboard");

  // `launch` arguments are split by hand; everything else goes to CLI11 as is.
  std::vector<std::string> tokens = args;
  LaunchSplit split;
  const bool is_launch = !args.empty() && args[0] == "launch";
  if (is_launch) {
    split = split_launch_args(std::vector<std::string>(args.begin() + 1, args.end()));
    tokens = {"launch"};
    tokens.insert(tokens.end(), split.option_tokens.begin(), split.option_tokens.end());
  }
  if (args.empty()) throw UsageError("no subcommand given; use one of: launch, config, env\n\n" + app.help());
  if (args[0].empty() || args[0][0] != '-') {
    const std::vector<std::string> subcommands = {"launch", "config", "env", "tokenize", "export", "runs", "plot", "status"};
    if (std::find(subcommands.begin(), subcommands.end(), args[0]) == subcommands.end()) {
      throw UsageError(fmt::format("unknown subcommand '{}'{}; use one of: launch, config, env, tokenize, export, runs, plot, status (mgtrain --help)", args[0],
                                   did_you_mean_suffix(args[0], subcommands)));
    }
  }

  try {
    std::vector<std::string> reversed(tokens.rbegin(), tokens.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return PrintRequest{app.help()};
  } catch (const CLI::CallForAllHelp&) {
    return PrintRequest{app.help("", CLI::AppFormatMode::All)};
  } catch (const CLI::ParseError& e) {
    if (want_version) return PrintRequest{version_text() + "\n"};
    std::string where;
    for (auto* sub = app.get_subcommands().empty() ? nullptr : app.get_subcommands().front(); sub;
         sub = sub->get_subcommands().empty() ? nullptr : sub->get_subcommands().front()) {
      where += (where.empty() ? "" : " ") + sub->get_name();
    }
    if (where.empty()) throw UsageError(fmt::format("{}\nRun 'mgtrain --help' for usage.", e.what()));
    throw UsageError(fmt::format("{}: {}\nRun 'mgtrain {} --help' for usage.", where, e.what(), where));
  }
  if (want_version) return PrintRequest{version_text() + "\n"};

  if (launch->parsed()) return build_launch_request(split, launch_opts);
  if (show_cmd->parsed()) {
    show.config.overrides = show_sets;
    take_config_positionals(show_positionals, show.config, "show");
    return show;
  }
  if (validate_cmd->parsed()) {
    ConfigValidateRequest validate;
    validate.config.overrides = validate_sets;
    take_config_positionals(validate_positionals, validate.config, "validate");
    if (!validate.config.path) throw UsageError("config validate: give the config file to check");
    return validate;
  }
  if (init_cmd->parsed()) {
    init.interactive_allowed = !non_interactive;
    for (const auto& q : init_questions()) {
      auto it = init_answers.find(q.key);
      if (it != init_answers.end()) init.answers.push_back({q.key, it->second, q.flag});
    }
    return init;
  }
  if (config->got_subcommand("docs")) return ConfigDocsRequest{};
  if (env_cmd->parsed()) return env;
  if (tokenize_cmd->parsed()) return tokenize;
  if (export_cmd->parsed()) return export_request;
  if (runs_cmd->parsed()) return runs_request;
  if (plot_cmd->parsed()) return plot_request;
  if (status_cmd->parsed()) return status_request;
  throw UsageError("give a subcommand (launch, config, env); see mgtrain --help");
}

}  // namespace mgtrain
