// Shared by the CLI tests: a launch command line parsed into its request, the UsageError (exit code 2) of one that
// must be refused, and the value a flag set.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <variant>
#include <vector>

#include "cli/cli.hpp"
#include "util/error.hpp"

namespace mgtrain::testing {

inline LaunchRequest launch(std::vector<std::string> args) {
  args.insert(args.begin(), "launch");
  auto request = parse_cli(args);
  REQUIRE(std::holds_alternative<LaunchRequest>(request));
  return std::get<LaunchRequest>(request);
}

// The UsageError of parsing `args`; fails the test on any other outcome, another exception included.
inline std::string usage_error(std::vector<std::string> args) {
  try {
    parse_cli(args);
  } catch (const UsageError& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  FAIL("expected a UsageError");
  return "";
}

inline std::string flag_value(const LaunchRequest& r, const std::string& key) {
  for (const auto& f : r.config.flags)
    if (f.key == key) return f.value;
  return "<unset>";
}

}  // namespace mgtrain::testing
