// Expansion of ${...} variables in config strings: ${run_id}, ${config_dir}, ${log_dir}, ${env:VAR}.
// "$$" is a literal "$". Unknown names and unset environment variables are errors, never empty strings.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mgtrain {

struct VariableScope {
  std::vector<std::pair<std::string, std::string>> values;            // name -> value
  std::function<std::optional<std::string>(const std::string&)> env;  // ${env:NAME}
};

// Throws ValueError (config_schema.hpp) naming the bad variable.
std::string expand_variables(const std::string& text, const VariableScope& scope);

}  // namespace mgtrain
