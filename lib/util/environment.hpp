// The process environment as a value: name -> value. Code takes an EnvMap instead of reading getenv(),
// so tests hand it any environment; current_environment() is the one place that reads the real one.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mgtrain {

using EnvMap = std::map<std::string, std::string>;

// This process's environment (environ).
EnvMap current_environment();

// The value of `name`, or nothing when it is not set.
std::optional<std::string> environment_value(const EnvMap& environment, const char* name);

// "KEY=VALUE" strings for execve.
std::vector<std::string> to_environ_strings(const EnvMap& environment);

}  // namespace mgtrain
