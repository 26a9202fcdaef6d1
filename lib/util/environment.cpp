// Reads environ into an EnvMap (see environment.hpp).
#include "util/environment.hpp"

extern char** environ;

namespace mgtrain {

EnvMap current_environment() {
  EnvMap env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::optional<std::string> environment_value(const EnvMap& environment, const char* name) {
  const auto found = environment.find(name);
  if (found == environment.end()) return std::nullopt;
  return found->second;
}

std::vector<std::string> to_environ_strings(const EnvMap& environment) {
  std::vector<std::string> strings;
  strings.reserve(environment.size());
  for (const auto& [key, value] : environment) strings.push_back(key + "=" + value);
  return strings;
}

}  // namespace mgtrain
