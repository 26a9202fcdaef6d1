// Help texts for a terminal: the torchrun personality's --help reads like torchrun 2.15's (usage line, option
// spellings, metavars, defaults, positionals), `mgtrain launch --help` and the personality's are wrapped to COLUMNS
// (else the terminal's width, else 80), and the personality's errors name torchrun's flags and help.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "cli/cli.hpp"
#include "util/error.hpp"

using namespace mgtrain;

namespace {

std::string help_text(const std::vector<std::string>& args, const EnvMap& env = {},
                      const CliInvocation& invocation = {}) {
  const CliRequest request = parse_cli(args, env, invocation);
  REQUIRE(std::holds_alternative<PrintRequest>(request));
  return std::get<PrintRequest>(request).text;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::size_t columns(const std::string& line) {
  return static_cast<std::size_t>(
      std::count_if(line.begin(), line.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0u) != 0x80u; }));
}

// Every line fits in `width` columns, unless it is one word that does not fit on any line.
void check_fits(const std::string& text, std::size_t width) {
  for (const auto& line : lines_of(text)) {
    if (columns(line) <= width) continue;
    const std::string word = line.substr(line.find_first_not_of(' '));
    INFO("width " << width << ": " << line);
    CHECK(word.find(' ') == std::string::npos);
  }
}

std::string usage_error(const std::vector<std::string>& args, const CliInvocation& invocation = {}) {
  try {
    parse_cli(args, {}, invocation);
  } catch (const UsageError& e) {
    return e.what();
  }
  FAIL("expected a UsageError");
  return "";
}

}  // namespace

TEST_CASE("torchrun personality's help: torchrun's usage line, options, metavars and defaults", "[cli][torchrun]") {
  const std::string help = help_text({"torchrun", "--help"}, {{"COLUMNS", "80"}}, {true, 0});
  const auto lines = lines_of(help);
  REQUIRE(!lines.empty());
  CHECK(lines[0] == "usage: torchrun [-h] [--nnodes NNODES] [--nproc-per-node NPROC_PER_NODE]");
  CHECK(lines[1] == "                [--rdzv-backend RDZV_BACKEND] [--rdzv-endpoint RDZV_ENDPOINT]");
  CHECK(help.find("                training_script ...\n") != std::string::npos);
  CHECK(help.find("Usage: mgtrain launch") == std::string::npos);
  for (const char* part : {
           "\npositional arguments:\n  training_script       Full path to the (single GPU) training",
           "\n  training_script_args  ",
           "\noptions:\n  -h, --help            show this help message and exit\n",
           "\n  --nnodes NNODES       Number of nodes",
           "\n  --nproc-per-node NPROC_PER_NODE, --nproc_per_node NPROC_PER_NODE\n",
           "\n  --start-method {spawn,fork,forkserver}, --start_method {spawn,fork,forkserver}\n",
           "\n  -m, --module          Change each process",
           "\n  -r REDIRECTS, --redirects REDIRECTS\n",
           "\n  --standalone          Start a local standalone rendezvous",
       }) {
    INFO(part);
    CHECK(help.find(part) != std::string::npos);
  }
  // torchrun 2.15's defaults (run.py), not mgtrain launch's; the same words with the lines joined.
  std::string joined;
  for (const auto& line : lines) joined += " " + line.substr(std::min(line.size(), line.find_first_not_of(' ')));
  for (const char* part :
       {"<minimum_nodes>:<maximum_nodes>. (default: 1:1)", "int]. (default: 1)",
        "Rendezvous backend. (default: static)", "before failing. (default: 0)", "(default: 0.1)", "(default: spawn)",
        "(default: null)", "(default: 29500)", "(default: 127.0.0.1)", "(default: SIGTERM,SIGINT,SIGHUP,SIGQUIT)",
        "SIGKILL.", "(default: 30)", "workers. (default: default)"}) {
    INFO(part);
    CHECK(joined.find(part) != std::string::npos);
  }
  // mgtrain's notes where it differs, and no mgtrain-only flag in torchrun's option list.
  CHECK(joined.find("mgtrain: accepted, no effect") != std::string::npos);
  CHECK(joined.find("mgtrain: refused") != std::string::npos);
  CHECK(help.find("--gpu-ids VALUE") == std::string::npos);
  CHECK(help.find("--nproc,") == std::string::npos);
  // `mgtrain torchrun --help` names itself so; -h is the same help.
  CHECK(help_text({"torchrun", "-h"}, {{"COLUMNS", "80"}}, {true, 0}) == help);
  CHECK(lines_of(help_text({"torchrun", "--help"}, {{"COLUMNS", "80"}}))[0] ==
        "usage: mgtrain torchrun [-h] [--nnodes NNODES] [--nproc-per-node NPROC_PER_NODE]");
}

TEST_CASE("help is wrapped to COLUMNS, else the terminal's width, else 80", "[cli][torchrun]") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"torchrun", "--help"}, std::vector<std::string>{"launch", "--help"},
        std::vector<std::string>{"--help"}, std::vector<std::string>{"config", "show", "--help"}}) {
    for (std::size_t width : {40, 60, 80, 100, 132, 200}) {
      INFO(args[0] << " " << args.back() << ", COLUMNS " << width);
      const std::string help = help_text(args, {{"COLUMNS", std::to_string(width)}});
      check_fits(help, width);
      if (width <= 80) {
        // Wider terminals get fewer lines: the width is used, not only respected.
        const std::string wide = help_text(args, {{"COLUMNS", "200"}});
        CHECK(lines_of(wide).size() <= lines_of(help).size());
      }
    }
  }
  // The terminal's width when COLUMNS is unset or not a number; 80 when stdout is no terminal.
  const std::vector<std::string> args = {"torchrun", "--help"};
  check_fits(help_text(args, {}, {true, 50}), 50);
  check_fits(help_text(args, {{"COLUMNS", "abc"}}, {true, 50}), 50);
  CHECK(help_text(args, {}, {true, 0}) == help_text(args, {{"COLUMNS", "80"}}, {true, 0}));
  CHECK(help_text(args, {{"COLUMNS", "120"}}, {true, 50}) == help_text(args, {{"COLUMNS", "120"}}, {true, 0}));
  // launch's long lines: the Forms and Examples of the footer, and the option lines, are wrapped too.
  const std::string launch = help_text({"launch", "--help"}, {{"COLUMNS", "80"}});
  CHECK(launch.find("\nUsage: mgtrain launch [OPTIONS]\n") != std::string::npos);
  CHECK(launch.find("\n  mgtrain launch [FLAGS] train.py [ARGS]\n      a .py script runs under launch.python") !=
        std::string::npos);
  check_fits(launch, 80);
}

TEST_CASE("torchrun personality's errors name torchrun's flags and its help", "[cli][torchrun][errors]") {
  // As a `torchrun` link: the program's name starts the message (main.cpp), torchrun's spelling is suggested.
  CHECK(usage_error({"torchrun", "--nprocs", "2", "train.py"}, {true, 0}) ==
        "unknown flag --nprocs (did you mean --nproc-per-node?)\nRun 'torchrun --help' for the flags.");
  CHECK(usage_error({"torchrun", "--nproc_per_nod", "2", "train.py"}, {true, 0}) ==
        "unknown flag --nproc_per_nod (did you mean --nproc_per_node?)\nRun 'torchrun --help' for the flags.");
  CHECK(usage_error({"torchrun", "--grace-perod", "2", "train.py"}, {true, 0}).find("--shutdown-timeout?") !=
        std::string::npos);
  // As `mgtrain torchrun`.
  CHECK(usage_error({"torchrun", "--nprocs", "2", "train.py"}) ==
        "torchrun: unknown flag --nprocs (did you mean --nproc-per-node?)\nRun 'mgtrain torchrun --help' for the "
        "flags.");
  CHECK(usage_error({"torchrun"}, {true, 0}) ==
        "the following arguments are required: training_script (e.g. torchrun --nproc-per-node 2 train.py)\n"
        "Run 'torchrun --help' for usage.");
  CHECK(usage_error({"torchrun", "--standalone=maybe", "train.py"}, {true, 0}).find("Run 'torchrun --help'") !=
        std::string::npos);
  CHECK(usage_error({"torchrun", "--nnodes"}, {true, 0}) == "--nnodes needs a value");
  // mgtrain launch keeps its own words.
  CHECK(usage_error({"launch", "--nprocs", "2", "train.py"}) ==
        "launch: unknown flag --nprocs (did you mean --nproc?)\nRun 'mgtrain launch --help' for the flags.");
}
