// The torchrun personality's --help (see torchrun_help.hpp): argparse's layout (help column 24, "usage:" continued
// under the first option, "positional arguments:" and "options:"), the text from torchrun_options.cpp's table.
#include "cli/torchrun_help.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "cli/help_layout.hpp"
#include "cli/torchrun_options.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain::cli_detail {
namespace {

// argparse: the help column is min(24, width - 20), at least 4.
std::size_t torchrun_help_column(std::size_t width) {
  return std::min<std::size_t>(24, std::max<std::size_t>(width - 20, 4));
}

std::string usage_metavar(const TorchrunOption& option) {
  if (option.metavar) return option.metavar;
  std::string name;
  for (const char* c = option.dest; *c; ++c) name += static_cast<char>(std::toupper(static_cast<unsigned char>(*c)));
  return name;
}

// "--nproc-per-node NPROC_PER_NODE, --nproc_per_node NPROC_PER_NODE"; "-m, --module".
std::string option_invocation(const TorchrunOption& option) {
  std::vector<std::string> spellings;
  for (const auto& name : split(option.names, ',')) {
    spellings.push_back(option.store_true ? name : name + " " + usage_metavar(option));
  }
  return fmt::format("{}", fmt::join(spellings, ", "));
}

std::string option_description(const TorchrunOption& option) {
  std::string text = option.torchrun_help;
  if (option.default_value) text += fmt::format(" (default: {})", option.default_value);
  if (option.help && *option.help) text += fmt::format(" mgtrain: {}.", option.help);
  return text;
}

const char* kTorchrunDescription = "Torch Distributed Elastic Training Launcher";

const char* kScriptHelp =
    "Full path to the (single GPU) training program/script to be launched in parallel, followed by all the arguments "
    "for the training script. mgtrain: a .py script runs under python -u ($PYTHON_EXEC, else python3), other "
    "programs as they are (-m, --no-python and --run-path change that).";

const char* kEpilog =
    "This is mgtrain's torchrun personality: torchrun 2.15's options, defaults, exit codes and console, with "
    "mgtrain's launcher underneath (docs/torchrun.md). Each option can also be set by its PET_ variable (PET_NNODES, "
    "PET_NPROC_PER_NODE, ...), as in torchrun; a flag wins over it. mgtrain's own launch flags (--gpu-ids, "
    "--hang-timeout, --hosts, ...) are accepted too: see mgtrain launch --help.";

const char* kScriptArgsHelp = "The training script's own arguments, a literal -- included.";

}  // namespace

std::string torchrun_usage(const std::string& program, std::size_t width) {
  const std::string prefix = "usage: " + program;
  std::vector<std::string> options = {"[-h]"};
  for (const auto& option : torchrun_options()) {
    const std::string first = split(option.names, ',').front();
    options.push_back("[" + first + (option.store_true ? "" : " " + usage_metavar(option)) + "]");
  }
  const std::vector<std::string> positionals = {"training_script", "..."};
  // argparse: the parts continue under the first one, unless the program's name takes more than 3/4 of the line;
  // here also when the widest part would not fit there.
  const std::size_t prefix_width = display_width(prefix) + 1;
  std::size_t widest = 0;
  for (const auto& option : options) widest = std::max(widest, display_width(option));
  const std::size_t indent = prefix_width <= width * 3 / 4 && prefix_width + widest <= width ? prefix_width : 4;
  std::vector<std::string> all = {prefix};
  all.insert(all.end(), options.begin(), options.end());
  all.insert(all.end(), positionals.begin(), positionals.end());
  std::string one = wrap_items(all, width, 0, indent);
  if (std::count(one.begin(), one.end(), '\n') == 1) return one;
  options.insert(options.begin(), prefix);
  return wrap_items(options, width, 0, indent) + wrap_items(positionals, width, indent, indent);
}

std::string torchrun_help(const std::string& program, std::size_t width) {
  const std::size_t column = torchrun_help_column(width);
  std::string text = torchrun_usage(program, width) + "\n" + wrap_words(kTorchrunDescription, width, 0, 0);
  text += "\npositional arguments:\n";
  text += list_entry("training_script", kScriptHelp, width, column);
  text += list_entry("training_script_args", kScriptArgsHelp, width, column);
  text += "\noptions:\n";
  text += list_entry("-h, --help", "show this help message and exit", width, column);
  for (const auto& option : torchrun_options())
    text += list_entry(option_invocation(option), option_description(option), width, column);
  text += "\n";
  text += wrap_words(kEpilog, width, 0, 0);
  return text;
}

}  // namespace mgtrain::cli_detail
