// libFuzzer target for the config loader (lib/config/config_loader.cpp): a YAML document and override lines
// (the input split at its first NUL byte: YAML before it, one KEY=VALUE override per line after it) either
// load into a Config or are refused with UsageError — no crash, no other exception (a yaml-cpp or standard
// library exception escaping is a finding), no sanitizer report. tests/fuzz/CMakeLists.txt builds it with
// clang++ -fsanitize=fuzzer,address,undefined; ctest runs a fixed number of inputs from config_corpus/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config_loader.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find('\0');
  const std::string yaml = input.substr(0, split);
  mgtrain::ConfigRequest request;
  if (split != std::string::npos) {
    std::size_t start = split + 1;
    while (start <= input.size() && request.overrides.size() < 16) {
      std::size_t end = input.find('\n', start);
      if (end == std::string::npos) end = input.size();
      if (end > start) request.overrides.push_back(input.substr(start, end - start));
      start = end + 1;
    }
  }
  mgtrain::EnvMap env{{"HOME", "/home/fuzz"}, {"MGTRAIN_TRAIN_MAX_STEPS", "3"}};
  mgtrain::LoadOptions options;
  options.make_run_id = [] { return std::string("20260101-000000-abcd"); };
  try {
    mgtrain::LoadedConfig loaded = mgtrain::load_config_text(yaml, "fuzz.yaml", request, env, options);
    if (loaded.config.launch.run_id.empty()) __builtin_trap();
  } catch (const mgtrain::UsageError&) {}
  return 0;
}
