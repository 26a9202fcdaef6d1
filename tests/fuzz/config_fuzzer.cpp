// libFuzzer target for the config loader (lib/config/config_loader.cpp): a YAML document, override lines and flag
// values (the input split at its NUL bytes: YAML before the first, one KEY=VALUE override per line after it, and after
// a second NUL one flag per line: its first byte picks the key, the rest is the value as typed) either
// load into a Config or are refused with UsageError — no crash, no other exception (a yaml-cpp or standard
// library exception escaping is a finding), no sanitizer report. tests/fuzz/CMakeLists.txt builds it with
// clang++ -fsanitize=fuzzer,address,undefined; ctest runs a fixed number of inputs from config_corpus/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config_loader.hpp"
#include "config/config_schema.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find('\0');
  const std::string yaml = input.substr(0, split);
  mgtrain::ConfigRequest request;
  // One item per line of `part`, at most 16.
  const auto lines = [](const std::string& part) {
    std::vector<std::string> items;
    for (std::size_t start = 0; start < part.size() && items.size() < 16;) {
      std::size_t end = part.find('\n', start);
      if (end == std::string::npos) end = part.size();
      if (end > start) items.push_back(part.substr(start, end - start));
      start = end + 1;
    }
    return items;
  };
  if (split != std::string::npos) {
    const std::size_t flags_at = input.find('\0', split + 1);
    request.overrides =
        lines(input.substr(split + 1, flags_at == std::string::npos ? std::string::npos : flags_at - split - 1));
    if (flags_at != std::string::npos) {
      const auto& schema = mgtrain::config_schema();
      for (const std::string& line : lines(input.substr(flags_at + 1))) {
        const auto& key = schema[static_cast<unsigned char>(line[0]) % schema.size()];
        request.flags.push_back({key.path, line.substr(1), "--fuzz-flag"});
      }
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
