// The process environment as a value: name -> value. Code takes an EnvMap instead of reading getenv(),
// so tests hand it any environment; current_environment() is the one place that reads the real one.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace mgtrain {

using EnvMap = std::map<std::string, std::string>;

// This process's environment (environ).
EnvMap current_environment();

// "KEY=VALUE" strings for execve.
std::vector<std::string> to_environ_strings(const EnvMap& environment);

}  // namespace mgtrain
