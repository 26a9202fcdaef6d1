// Entry point of the launcher `mgtrain`: parse the command line, run the subcommand, and turn any
// error into one message on stderr and its documented exit code (docs/exit-codes.md). Invoked as `torchrun` (the
// link `cmake --install` puts beside it) it is `mgtrain torchrun`, with torchrun's exit codes: 2 for a command line
// that does not parse (CommandLineError: where argparse exits 2), 1 for every other failure; an error after that is
// recorded in the launcher's TORCHELASTIC_ERROR_FILE, as torchrun's @record main does.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "launch/torchrun_personality.hpp"
#include "util/environment.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

int dispatch(const mgtrain::CliRequest& request) {
  using namespace mgtrain;
  return std::visit(Overloaded{
                        [](const LaunchRequest& r) { return run_launch_command(r); },
                        [](const ConfigShowRequest& r) { return run_config_show(r); },
                        [](const ConfigValidateRequest& r) { return run_config_validate(r); },
                        [](const ConfigInitRequest& r) { return run_config_init(r); },
                        [](const ConfigDocsRequest&) { return run_config_docs(); },
                        [](const EnvRequest& r) { return run_env_command(r); },
                        [](const TokenizeRequest& r) { return run_tokenize_command(r); },
                        [](const ExportRequest& r) { return run_export_command(r); },
                        [](const RunsRequest& r) { return run_runs_command(r); },
                        [](const PlotRequest& r) { return run_plot_command(r); },
                        [](const StatusRequest& r) { return run_status_command(r); },
                        [](const PrintRequest& r) {
                          std::fputs(r.text.c_str(), stdout);
                          return exit_code::kSuccess;
                        },
                    },
                    request);
}

// argv[0] names the program: `torchrun` (a symlink or hard link to mgtrain) selects torchrun's personality.
bool invoked_as_torchrun(std::string_view argv0) {
  const std::size_t slash = argv0.rfind('/');
  return argv0.substr(slash == std::string_view::npos ? 0 : slash + 1) == "torchrun";
}

// stdout's terminal width for help texts; 0 when stdout is no terminal (help is then 80 columns, or COLUMNS).
std::size_t terminal_columns() {
  winsize size{};
  if (isatty(STDOUT_FILENO) == 0 || ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mgtrain;
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool as_torchrun = argc > 0 && invoked_as_torchrun(argv[0]);
  if (as_torchrun) args.insert(args.begin(), "torchrun");
  const bool torchrun = !args.empty() && args[0] == "torchrun";
  const char* program = as_torchrun ? "torchrun" : "mgtrain";
  // As torchrun's @record main: an error after argparse's own checks goes into its error file, and exits 1.
  bool command_line_error = false;
  const int code = log::run_main(program, [&] {
    try {
      return dispatch(parse_cli(args, current_environment(), CliInvocation{as_torchrun, terminal_columns()}));
    } catch (const CommandLineError&) {
      command_line_error = true;
      throw;
    } catch (const std::exception& error) {
      if (torchrun) {
        write_torchrun_exception_file(
            std::string(dynamic_cast<const UsageError*>(&error) ? "UsageError: " : "Error: ") + error.what(),
            current_environment());
      }
      throw;
    }
  });
  if (torchrun && code != exit_code::kSuccess) return command_line_error ? exit_code::kUsage : exit_code::kFailure;
  return code;
}
