// Entry point of the launcher `mgtrain`: parse the command line, run the subcommand, and turn any
// error into one message on stderr and its documented exit code (docs/exit-codes.md).
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
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

}  // namespace

int main(int argc, char** argv) {
  return mgtrain::log::run_main("mgtrain", [&] {
    std::vector<std::string> args(argv + 1, argv + argc);
    return dispatch(mgtrain::parse_cli(args, mgtrain::current_environment()));
  });
}
