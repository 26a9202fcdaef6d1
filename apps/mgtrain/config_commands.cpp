// `mgtrain config show | validate | init | docs`.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "config/config_docs.hpp"
#include "config/config_loader.hpp"
#include "config/config_yaml.hpp"
#include "config/starter_config.hpp"
#include "launch/worker_plugins.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"

namespace mgtrain {

int run_config_show(const ConfigShowRequest& request) {
  LoadedConfig loaded = load_config(request.config, current_environment());
  check_config_against_worker(loaded);  // a registered model's options appear with their defaults
  std::fputs(config_to_yaml(loaded.config, request.show_origin ? &loaded.origin : nullptr).c_str(), stdout);
  return exit_code::kSuccess;
}

int run_config_validate(const ConfigValidateRequest& request) {
  LoadedConfig loaded = load_config(request.config, current_environment());
  check_config_against_worker(loaded);  // model.type and data.dataset against what launch.worker registers
  std::printf("%s: OK\n", request.config.path->c_str());
  return exit_code::kSuccess;
}

int run_config_init(const ConfigInitRequest& request) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(request.path, ec) && !request.force) {
    throw UsageError(fmt::format("config init: {} already exists; choose another path or add --force to overwrite it",
                                 request.path));
  }
  AskFunction ask = [](const std::string& prompt) -> std::optional<std::string> {
    std::cout << prompt << std::flush;
    std::string line;
    if (!std::getline(std::cin, line)) return std::nullopt;
    return line;
  };
  const bool interactive = request.interactive_allowed && isatty(STDIN_FILENO);
  Config config = answer_init_questions(request.answers, interactive ? &ask : nullptr, std::cerr);

  // Written beside the target and renamed over it, so an existing file is never left half-written.
  write_file_atomically(request.path, starter_config_yaml(config));
  std::printf("wrote %s; check it with: mgtrain config validate %s\n", request.path.c_str(), request.path.c_str());
  return exit_code::kSuccess;
}

int run_config_docs() {
  std::fputs(config_reference_markdown().c_str(), stdout);
  return exit_code::kSuccess;
}

}  // namespace mgtrain
