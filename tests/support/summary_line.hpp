// Reads a number out of the trainer's final `{"summary": {...}}` line in a run's output (tests only).
#pragma once

#include <regex>
#include <string>

namespace mgtrain::testing {

// The value of "key": NUMBER inside the summary line of `output`, or -1.
inline double summary_number(const std::string& output, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(R"(\{"summary":.*\})"))) return -1;
  const std::string summary = m.str();
  if (!std::regex_search(summary, m, std::regex("\"" + key + "\":(-?[0-9.e+-]+)"))) return -1;
  return std::stod(m[1].str());
}

}  // namespace mgtrain::testing
