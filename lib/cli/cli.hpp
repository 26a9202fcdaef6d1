// The command-line model of `mgtrain`: what each subcommand was asked to do, parsed from argv
// (CLI11 stays inside lib/cli's .cpp files). Pure: no I/O, so every spelling is unit-tested.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "config/config_request.hpp"
#include "util/environment.hpp"

namespace mgtrain {

struct ConfigShowRequest {
  ConfigRequest config;
  bool show_origin = false;
};

struct ConfigValidateRequest {
  ConfigRequest config;
};

// `mgtrain config init [PATH]`: answers given by flags; unanswered questions are asked on a TTY.
struct ConfigInitRequest {
  std::string path = "mgtrain.yaml";
  bool force = false;
  bool interactive_allowed = true;  // false with --yes/--non-interactive
  std::vector<FlagSetting> answers;
};

struct ConfigDocsRequest {};

// `mgtrain tokenize TEXT OUT_DIR`: a text file to train.bin/val.bin/meta.json for the `tokens` data set.
struct TokenizeRequest {
  std::string input;
  std::string output_dir;
  std::string level = "char";  // char | byte
  double val_fraction = 0.1;
};

// `mgtrain export CHECKPOINT [--format safetensors|torchscript] [-o OUT] [--force]`: the model of a training
// checkpoint as a plain safetensors file (torch-free) or a TorchScript module (by mgtrain-worker).
struct ExportRequest {
  std::string checkpoint;
  std::string format = "safetensors";  // safetensors | torchscript
  std::string output;   // empty: next to the checkpoint, <stem>.model.safetensors / <stem>.torchscript.pt
  bool force = false;   // overwrite an existing output
  std::string log_dir;  // where a run id is looked up; empty: $MGTRAIN_LAUNCH_LOG_DIR, else "runs"
};

// `mgtrain runs [--log-dir DIR] [--json]`: the run history under the log directory, newest first.
struct RunsRequest {
  std::string log_dir;  // empty: $MGTRAIN_LAUNCH_LOG_DIR, else "runs"
  bool json = false;
};

// `mgtrain plot RUN [RUN...] [--metric NAME] [-o OUT.png|OUT.svg] [--log-dir DIR]`: curves of a metric.
struct PlotRequest {
  std::vector<std::string> runs;  // run ids under the log directory, or run directory paths
  std::string metric = "loss";
  std::string output;   // empty: <metric>.png in the current directory
  std::string log_dir;  // as for RunsRequest
};

// `mgtrain status [RUN] [--log-dir DIR] [--json] [--stacks]`: a run's live state from its launcher's status API, or
// from its files when no launcher serves it (docs/monitoring.md#status-api-and-dashboard); with --stacks, every
// running rank's stacks dumped now through POST /stacks (docs/diagnosis.md).
struct StatusRequest {
  std::string run;      // run id under the log directory, or a run directory; empty: the newest run
  std::string log_dir;  // empty: $MGTRAIN_LAUNCH_LOG_DIR, else "runs"
  bool json = false;    // the /status JSON (with --stacks: the /stacks JSON) as the server sends it
  bool stacks = false;  // dump the running ranks' stacks now (POST /stacks) and print their top frames
};

struct EnvRequest {
  bool json = false;
};

// --help / --version or a help text for a subcommand: print and exit 0.
struct PrintRequest {
  std::string text;
};

using CliRequest =
    std::variant<LaunchRequest, ConfigShowRequest, ConfigValidateRequest, ConfigInitRequest, ConfigDocsRequest,
                 EnvRequest, TokenizeRequest, ExportRequest, RunsRequest, PlotRequest, StatusRequest, PrintRequest>;

// How mgtrain was started, beyond its arguments (apps/mgtrain/main.cpp finds out): for help texts and for the
// messages that point at them.
struct CliInvocation {
  // argv[0] is `torchrun` (a link to mgtrain): the arguments then start with "torchrun", and the personality's help
  // and errors say `torchrun` instead of `mgtrain torchrun`.
  bool as_torchrun = false;
  std::size_t terminal_columns = 0;  // stdout's terminal width; 0 when stdout is no terminal
};

// Parses argv without argv[0]. Throws UsageError with a message that names the bad argument.
// `env` is the environment the command runs in, for torchrun's PET_* variables (launch, config show/validate):
// they set what no flag gave, above the config's own sources (docs/torchrun.md). Help is wrapped to COLUMNS, else
// to the terminal's width, else to 80 columns. Nothing else is read from it.
CliRequest parse_cli(const std::vector<std::string>& args, const EnvMap& env, const CliInvocation& invocation);
// The same, started as `mgtrain` with stdout no terminal.
CliRequest parse_cli(const std::vector<std::string>& args, const EnvMap& env);
// The same in an empty environment.
CliRequest parse_cli(const std::vector<std::string>& args);

// One PET_* variable of an environment and what `mgtrain launch` does with it (for `mgtrain env`).
struct TorchrunVariable {
  std::string name;  // "PET_NNODES"
  std::string value;
  std::string effect;  // "launch.nnodes = 2", "ignored: ...", "refused: ..."
};
std::vector<TorchrunVariable> describe_torchrun_variables(const EnvMap& env);

}  // namespace mgtrain
