// The subcommands of `mgtrain`, one function each; main.cpp dispatches to them. Each returns the exit code.
#pragma once

#include "cli/cli.hpp"

namespace mgtrain {

int run_launch_command(const LaunchRequest& request);
int run_config_show(const ConfigShowRequest& request);
int run_config_validate(const ConfigValidateRequest& request);
int run_config_init(const ConfigInitRequest& request);
int run_config_docs();
int run_env_command(const EnvRequest& request);
int run_tokenize_command(const TokenizeRequest& request);
int run_export_command(const ExportRequest& request);
int run_runs_command(const RunsRequest& request);
int run_plot_command(const PlotRequest& request);
int run_status_command(const StatusRequest& request);

}  // namespace mgtrain
