// libFuzzer target for the command line (lib/cli) and the config it asks for (lib/config): the input is an argument
// vector, one argument per NUL-separated part (the first one picks the subcommand: launch most of the time), parsed
// by parse_cli; a launch, config show or config validate request then has its config loaded (no file: only the
// flags, overrides and PET_* variables). Either it parses and loads, or it is refused with UsageError — any other
// exception escaping (CLI11's std::invalid_argument from a flag given "x", a yaml-cpp exception), a crash or a
// sanitizer report is a finding. tests/fuzz/CMakeLists.txt builds it; ctest runs a fixed number of inputs from
// cli_corpus/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "config/config_loader.hpp"
#include "util/error.hpp"

namespace {

const char* const kSubcommands[] = {"launch", "launch", "launch", "launch", "config", "env", "runs", "export"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::vector<std::string> args = {kSubcommands[data[0] % (sizeof kSubcommands / sizeof kSubcommands[0])]};
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (std::size_t start = 0; start <= input.size() && args.size() < 32;) {
    std::size_t end = input.find('\0', start);
    if (end == std::string::npos) end = input.size();
    args.push_back(input.substr(start, end - start));
    start = end + 1;
  }
  const mgtrain::EnvMap env{{"HOME", "/home/fuzz"}, {"PET_NPROC_PER_NODE", "1"}};
  mgtrain::LoadOptions options;
  options.make_run_id = [] { return std::string("20260101-000000-abcd"); };
  try {
    const mgtrain::CliRequest request = mgtrain::parse_cli(args, env);
    mgtrain::ConfigRequest config;
    if (const auto* launch = std::get_if<mgtrain::LaunchRequest>(&request)) config = launch->config;
    if (const auto* show = std::get_if<mgtrain::ConfigShowRequest>(&request)) config = show->config;
    if (const auto* check = std::get_if<mgtrain::ConfigValidateRequest>(&request)) config = check->config;
    config.path.reset();  // the fuzzer reads no files
    mgtrain::load_config(config, env, options);
  } catch (const mgtrain::UsageError&) {}
  return 0;
}
