// ${...} expansion for config strings (see path_variables.hpp).
#include "config/path_variables.hpp"

#include <fmt/format.h>

#include "config/config_schema.hpp"
#include "util/did_you_mean.hpp"
#include "util/strings.hpp"

namespace mgtrain {

std::string expand_variables(const std::string& text, const VariableScope& scope) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$') {
      out += text[i];
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    if (i + 1 >= text.size() || text[i + 1] != '{') {
      out += '$';
      continue;
    }
    const auto close = text.find('}', i + 2);
    if (close == std::string::npos)
      throw ValueError{fmt::format("unterminated variable in '{}' (write $$ for a literal $)", text)};
    const std::string name = text.substr(i + 2, close - i - 2);
    if (starts_with(name, "env:")) {
      const std::string var = name.substr(4);
      auto value = scope.env ? scope.env(var) : std::nullopt;
      if (!value) throw ValueError{fmt::format("${{{}}}: environment variable {} is not set", name, var)};
      out += *value;
    } else {
      bool found = false;
      std::vector<std::string> known;
      for (const auto& [n, v] : scope.values) {
        known.push_back(n);
        if (n == name) {
          out += v;
          found = true;
          break;
        }
      }
      if (!found) {
        std::string list;
        for (const auto& n : known) list += "${" + n + "}, ";
        throw ValueError{fmt::format("unknown variable ${{{}}}{} (known: {}${{env:NAME}})", name,
                                     did_you_mean_suffix(name, known), list)};
      }
    }
    i = close;
  }
  return out;
}

}  // namespace mgtrain
