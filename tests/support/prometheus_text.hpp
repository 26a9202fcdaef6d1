// A strict line-by-line checker of the Prometheus text exposition format (version 0.0.4), for the tests
// of the status API's /metrics: comment lines (# HELP / # TYPE), sample lines (name, labels, value,
// optional timestamp), names, label escapes, float values, one TYPE/HELP per metric before its samples,
// samples of a metric kept together, no repeated series, a final newline.
#pragma once

#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "util/strings.hpp"

namespace mgtrain::testing {

struct PrometheusSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Problems found ("line N: why"); empty when the text follows the rules. `samples` gets every sample.
inline std::vector<std::string> prometheus_text_problems(const std::string& text,
                                                         std::vector<PrometheusSample>* samples = nullptr) {
  std::vector<std::string> problems;
  if (text.empty() || text.back() != '\n') problems.push_back("the text does not end with a newline");
  static const std::regex name_re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex label_name_re("[a-zA-Z_][a-zA-Z0-9_]*");
  static const std::set<std::string> types = {"counter", "gauge", "histogram", "summary", "untyped"};
  std::map<std::string, std::string> typed;  // name -> type
  std::set<std::string> helped, finished_metrics, series;
  std::string current_metric;
  auto parse_value = [](const std::string& token, double& value) {
    if (token == "NaN" || token == "+Inf" || token == "-Inf" || token == "Inf") return true;
    char* end = nullptr;
    value = std::strtod(token.c_str(), &end);
    return !token.empty() && end == token.c_str() + token.size() && token.find_first_of("xXpP") == std::string::npos;
  };
  std::size_t line_number = 0;
  for (const std::string& line : split_lines(text)) {
    ++line_number;
    const std::string where = "line " + std::to_string(line_number) + ": ";
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::smatch m;
      static const std::regex help_re("# HELP ([^ ]+) (.*)");
      static const std::regex type_re("# TYPE ([^ ]+) ([^ ]+)");
      if (std::regex_match(line, m, help_re)) {
        if (!std::regex_match(m[1].str(), name_re)) problems.push_back(where + "bad metric name in HELP");
        if (!helped.insert(m[1].str()).second) problems.push_back(where + "second HELP for " + m[1].str());
      } else if (std::regex_match(line, m, type_re)) {
        const std::string name = m[1].str();
        if (!std::regex_match(name, name_re)) problems.push_back(where + "bad metric name in TYPE");
        if (!types.count(m[2].str())) problems.push_back(where + "unknown type " + m[2].str());
        if (typed.count(name)) problems.push_back(where + "second TYPE for " + name);
        if (finished_metrics.count(name) || current_metric == name)
          problems.push_back(where + "TYPE after samples of " + name);
        typed[name] = m[2].str();
      } else if (line.rfind("# HELP", 0) == 0 || line.rfind("# TYPE", 0) == 0) {
        problems.push_back(where + "malformed HELP/TYPE line");
      }
      continue;  // other comments are allowed
    }
    // name{labels} value [timestamp]
    std::size_t at = 0;
    while (at < line.size() && line[at] != '{' && line[at] != ' ') ++at;
    const std::string name = line.substr(0, at);
    if (!std::regex_match(name, name_re)) {
      problems.push_back(where + "bad metric name '" + name + "'");
      continue;
    }
    PrometheusSample sample;
    sample.name = name;
    bool ok = true;
    if (at < line.size() && line[at] == '{') {
      ++at;
      while (ok && at < line.size() && line[at] != '}') {
        std::size_t eq = line.find('=', at);
        if (eq == std::string::npos) {
          ok = false;
          break;
        }
        const std::string label = line.substr(at, eq - at);
        if (!std::regex_match(label, label_name_re) || label.rfind("__", 0) == 0) {
          problems.push_back(where + "bad label name '" + label + "'");
          ok = false;
          break;
        }
        at = eq + 1;
        if (at >= line.size() || line[at] != '"') {
          ok = false;
          break;
        }
        ++at;
        std::string value;
        while (at < line.size() && line[at] != '"') {
          if (line[at] == '\\') {
            if (at + 1 >= line.size() || (line[at + 1] != '\\' && line[at + 1] != '"' && line[at + 1] != 'n')) {
              problems.push_back(where + "bad escape in a label value");
              ok = false;
              break;
            }
            value += line[at + 1] == 'n' ? '\n' : line[at + 1];
            at += 2;
          } else {
            value += line[at++];
          }
        }
        if (!ok || at >= line.size()) {
          ok = false;
          break;
        }
        ++at;  // closing quote
        if (sample.labels.count(label)) problems.push_back(where + "label " + label + " twice");
        sample.labels[label] = value;
        if (at < line.size() && line[at] == ',') ++at;
      }
      if (!ok || at >= line.size() || line[at] != '}') {
        problems.push_back(where + "malformed label set");
        continue;
      }
      ++at;
    }
    if (at >= line.size() || line[at] != ' ') {
      problems.push_back(where + "no space before the value");
      continue;
    }
    const std::string rest = line.substr(at + 1);
    const std::size_t space = rest.find(' ');
    const std::string value_text = rest.substr(0, space);
    if (!parse_value(value_text, sample.value)) problems.push_back(where + "bad value '" + value_text + "'");
    if (space != std::string::npos) {
      const std::string stamp = rest.substr(space + 1);
      if (stamp.empty() || stamp.find_first_not_of("-0123456789") != std::string::npos)
        problems.push_back(where + "bad timestamp");
    }
    if (name != current_metric) {
      if (finished_metrics.count(name)) problems.push_back(where + "samples of " + name + " are not together");
      if (!current_metric.empty()) finished_metrics.insert(current_metric);
      current_metric = name;
    }
    std::string key = name;
    for (const auto& [k, v] : sample.labels) key += "|" + k + "=" + v;
    if (!series.insert(key).second) problems.push_back(where + "repeated series " + key);
    if (samples) samples->push_back(sample);
  }
  return problems;
}

}  // namespace mgtrain::testing
