// The subcommands other than `launch` (see subcommands.hpp): config show/validate/init/docs, env, tokenize,
// export, runs, plot and status. Each class registers its options with CLI11 and builds its request.
#include <map>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/subcommands.hpp"
#include "config/starter_config.hpp"
#include "util/error.hpp"

namespace mgtrain::cli_detail {
namespace {

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

class ConfigShow final : public Subcommand {
 public:
  explicit ConfigShow(CLI::App& config)
      : cmd_(config.add_subcommand("show", "print the merged, validated config as YAML (what will run)")) {
    cmd_->add_option("args", positionals_, "CONFIG.yaml and KEY=VALUE overrides")->type_name("");
    cmd_->add_option("--set", sets_, "set a key: --set train.batch_size=32 (repeatable)")
        ->type_name("KEY=VALUE")
        ->allow_extra_args(false);
    cmd_->add_flag("--show-origin", show_.show_origin, "annotate each value with where it came from");
    cmd_->footer(
        "Example:\n  mgtrain config show configs/fashion_mnist_cnn.yaml --set train.batch_size=32 --show-origin");
  }
  std::optional<CliRequest> request() override {
    if (!cmd_->parsed()) return std::nullopt;
    show_.config.overrides = sets_;
    take_config_positionals(positionals_, show_.config, "show");
    return show_;
  }

 private:
  CLI::App* cmd_;
  std::vector<std::string> positionals_, sets_;
  ConfigShowRequest show_;
};

class ConfigValidate final : public Subcommand {
 public:
  explicit ConfigValidate(CLI::App& config)
      : cmd_(config.add_subcommand("validate", "check a config and its overrides; exit 2 naming the first problem")) {
    cmd_->add_option("args", positionals_, "CONFIG.yaml and KEY=VALUE overrides")->type_name("");
    cmd_->add_option("--set", sets_, "set a key (repeatable)")->type_name("KEY=VALUE")->allow_extra_args(false);
  }
  std::optional<CliRequest> request() override {
    if (!cmd_->parsed()) return std::nullopt;
    ConfigValidateRequest validate;
    validate.config.overrides = sets_;
    take_config_positionals(positionals_, validate.config, "validate");
    if (!validate.config.path) throw UsageError("config validate: give the config file to check");
    return validate;
  }

 private:
  CLI::App* cmd_;
  std::vector<std::string> positionals_, sets_;
};

// `config init`: one flag per starter-config question (starter_config.hpp).
class ConfigInit final : public Subcommand {
 public:
  explicit ConfigInit(CLI::App& config)
      : cmd_(config.add_subcommand("init", "write a commented starter config (asks questions on a terminal)")) {
    cmd_->add_option("path", init_.path, "file to write (default mgtrain.yaml)");
    cmd_->add_flag("--force", init_.force, "overwrite an existing file");
    cmd_->add_flag("-y,--yes,--non-interactive", non_interactive_,
                   "do not ask; unanswered questions take their defaults");
    for (const auto& q : init_questions()) {
      std::string key = q.key;
      cmd_->add_option_function<std::string>(
              q.flag, [this, key](const std::string& v) { answers_[key] = v; }, q.question)
          ->type_name("VALUE");
    }
    cmd_->footer("Example:\n  mgtrain config init my.yaml --nproc 4 --model cnn --dataset mnist --yes");
  }
  std::optional<CliRequest> request() override {
    if (!cmd_->parsed()) return std::nullopt;
    init_.interactive_allowed = !non_interactive_;
    for (const auto& q : init_questions()) {
      auto it = answers_.find(q.key);
      if (it != answers_.end()) init_.answers.push_back({q.key, it->second, q.flag});
    }
    return init_;
  }

 private:
  CLI::App* cmd_;
  ConfigInitRequest init_;
  bool non_interactive_ = false;
  std::map<std::string, std::string> answers_;  // question key -> value given by its flag
};

class ConfigDocs final : public Subcommand {
 public:
  explicit ConfigDocs(CLI::App& config)
      : cmd_(config.add_subcommand("docs", "print the config reference (docs/config.md) generated from the schema")) {}
  std::optional<CliRequest> request() override {
    if (!cmd_->parsed()) return std::nullopt;
    return ConfigDocsRequest{};
  }

 private:
  CLI::App* cmd_;
};

// A subcommand whose request is exactly what CLI11 filled in: env, tokenize, export, runs, plot, status.
// Its add_* function binds the options to fields().
template <class Request>
class PlainSubcommand final : public Subcommand {
 public:
  PlainSubcommand(CLI::App& app, const char* name, const char* description)
      : cmd_(app.add_subcommand(name, description)) {}
  CLI::App& cmd() { return *cmd_; }
  Request& fields() { return request_; }
  std::optional<CliRequest> request() override {
    if (!cmd_->parsed()) return std::nullopt;
    return request_;
  }

 private:
  CLI::App* cmd_;
  Request request_;
};

}  // namespace

std::vector<std::unique_ptr<Subcommand>> add_config(CLI::App& app) {
  CLI::App* config = app.add_subcommand("config", "show, check or create a config file");
  config->require_subcommand(1);
  std::vector<std::unique_ptr<Subcommand>> subcommands;
  subcommands.push_back(std::make_unique<ConfigShow>(*config));
  subcommands.push_back(std::make_unique<ConfigValidate>(*config));
  subcommands.push_back(std::make_unique<ConfigInit>(*config));
  subcommands.push_back(std::make_unique<ConfigDocs>(*config));
  return subcommands;
}

std::unique_ptr<Subcommand> add_env(CLI::App& app) {
  auto sub = std::make_unique<PlainSubcommand<EnvRequest>>(
      app, "env", "print versions, build options, GPUs, cores, hostname and network interfaces");
  CLI::App& cmd = sub->cmd();
  EnvRequest& env = sub->fields();
  cmd.add_flag("--json", env.json, "machine-readable output");
  return sub;
}

std::unique_ptr<Subcommand> add_tokenize(CLI::App& app) {
  auto sub = std::make_unique<PlainSubcommand<TokenizeRequest>>(
      app, "tokenize", "turn a text file into token files for the `tokens` data set");
  CLI::App& cmd = sub->cmd();
  TokenizeRequest& tokenize = sub->fields();
  cmd.add_option("text", tokenize.input, "the text file")->required();
  cmd.add_option("out_dir", tokenize.output_dir, "directory for train.bin, val.bin and meta.json")->required();
  cmd.add_option("--level", tokenize.level, "char (vocabulary = the text's characters) or byte (256 ids)")
      ->check(CLI::IsMember({"char", "byte"}));
  cmd.add_option("--val-fraction", tokenize.val_fraction, "last fraction of the tokens that goes to val.bin (0: none)")
      ->check(CLI::Range(0.0, 0.99));
  cmd.footer(
      "Example:\n  mgtrain tokenize input.txt data/shakespeare_char\n"
      "  mgtrain launch --nproc 2 configs/tokens_gpt.yaml data.path=data/shakespeare_char/train.bin");
  return sub;
}

std::unique_ptr<Subcommand> add_export(CLI::App& app) {
  auto sub = std::make_unique<PlainSubcommand<ExportRequest>>(
      app, "export", "write a checkpoint's model as safetensors (for Python) or TorchScript");
  CLI::App& cmd = sub->cmd();
  ExportRequest& request = sub->fields();
  cmd.add_option("checkpoint", request.checkpoint,
                 "a checkpoint file (checkpoint-step*.safetensors), a checkpoint directory's latest or best file, a "
                 "checkpoint directory or a run directory (its newest valid checkpoint), or a run id")
      ->required();
  cmd.add_option("--format", request.format,
                 "safetensors: the weights, named like the model's parameters (default); torchscript: a module for "
                 "torch.jit.load (runs mgtrain-worker)")
      ->check(CLI::IsMember({"safetensors", "torchscript"}));
  cmd.add_option("-o,--output", request.output,
                 "file to write (default: next to the checkpoint, <stem>.model.safetensors or <stem>.torchscript.pt)");
  cmd.add_flag("--force", request.force, "overwrite an existing output file");
  cmd.add_option("--log-dir,--log_dir", request.log_dir,
                 "where a run id is looked up (default: $MGTRAIN_LAUNCH_LOG_DIR, else runs)");
  cmd.footer(
      "Examples:\n  mgtrain export r1    # run r1's newest valid checkpoint\n"
      "  mgtrain export runs/r1/checkpoints/latest\n"
      "  mgtrain export runs/r1/checkpoints/checkpoint-step000001000.safetensors\n"
      "  mgtrain export runs/r1/checkpoints/checkpoint-step000001000.safetensors --format torchscript -o model.pt\n"
      "In Python: safetensors.torch.load_file(OUT) gives the state_dict; torch.jit.load(OUT) the module.\n"
      "Docs: docs/checkpoints.md#export");
  return sub;
}

// runs, plot and status: docs/monitoring.md.
std::unique_ptr<Subcommand> add_runs(CLI::App& app) {
  auto sub = std::make_unique<PlainSubcommand<RunsRequest>>(
      app, "runs", "list past runs: id, status, start, duration, steps, best metric (newest first)");
  CLI::App& cmd = sub->cmd();
  RunsRequest& request = sub->fields();
  cmd.add_option("--log-dir,--log_dir", request.log_dir,
                 "where run directories are (default: $MGTRAIN_LAUNCH_LOG_DIR, else runs)");
  cmd.add_flag("--json", request.json, "machine-readable output (one JSON array)");
  cmd.footer("Example:\n  mgtrain runs --log-dir runs\nDocs: docs/monitoring.md#run-history");
  return sub;
}

std::unique_ptr<Subcommand> add_plot(CLI::App& app) {
  auto sub = std::make_unique<PlainSubcommand<PlotRequest>>(
      app, "plot", "draw a metric's curves of one or more runs as PNG or SVG (runs mgtrain-plot)");
  CLI::App& cmd = sub->cmd();
  PlotRequest& request = sub->fields();
  cmd.add_option("runs", request.runs, "run ids under the log directory, or run directory paths")->required();
  cmd.add_option("--metric", request.metric,
                 "loss (default), lr, samples_per_s, eval.loss, eval.accuracy, ... (any column of metrics.jsonl)");
  cmd.add_option("-o,--output", request.output, "the image: .png or .svg (default: <metric>.png here)");
  cmd.add_option("--log-dir,--log_dir", request.log_dir,
                 "where run directories are (default: $MGTRAIN_LAUNCH_LOG_DIR, else runs)");
  cmd.footer(
      "Examples:\n  mgtrain plot r1 r2 --metric eval.accuracy -o accuracy.svg\n  mgtrain plot runs/r1 -o loss.png\n"
      "Docs: docs/monitoring.md#plots");
  return sub;
}

std::unique_ptr<Subcommand> add_status(CLI::App& app) {
  auto sub = std::make_unique<PlainSubcommand<StatusRequest>>(
      app, "status", "a run's ranks, steps, losses, CPU and GPUs, live from its launcher's status API");
  CLI::App& cmd = sub->cmd();
  StatusRequest& request = sub->fields();
  cmd.add_option("run", request.run, "run id under the log directory, or a run directory (default: the newest run)");
  cmd.add_option("--log-dir,--log_dir", request.log_dir,
                 "where run directories are (default: $MGTRAIN_LAUNCH_LOG_DIR, else runs)");
  cmd.add_flag("--json", request.json, "the /status JSON as the launcher serves it (with --stacks: the /stacks JSON)");
  cmd.add_flag("--stacks", request.stacks,
               "dump every running rank's stacks now, without stopping the job, and print their top frames and "
               "stacks files (POST /stacks; needs the run's status_token)");
  cmd.footer(
      "The launcher serves it with --status-port PORT (launch.status_port); without a live launcher the\n"
      "command says so and shows what the run's files say.\nExamples:\n  mgtrain status\n  mgtrain status my-run "
      "--json\n  mgtrain status my-run --stacks\n"
      "Exit codes with --stacks: 0 dumped, 2 no such run, 3 not running, 4 no status API, 5 token, 6 busy "
      "(docs/exit-codes.md)\n"
      "Docs: docs/monitoring.md#status-api-and-dashboard, docs/diagnosis.md");
  return sub;
}

}  // namespace mgtrain::cli_detail
