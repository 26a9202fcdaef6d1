// Emits a Config as YAML in schema order, and compares two such texts (see config_yaml.hpp).
#include "config/config_yaml.hpp"

#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/config_schema.hpp"

namespace mgtrain {

std::string config_to_yaml(const Config& config, const std::map<std::string, std::string>* origin) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& section : config_sections()) {
    out << YAML::Key << section << YAML::Value << YAML::BeginMap;
    for (const auto& key : config_schema()) {
      if (key.section() != section) continue;
      out << YAML::Key << key.path.substr(section.size() + 1) << YAML::Value << key.read(config);
      if (origin) {
        auto it = origin->find(key.path);
        if (it != origin->end()) out << YAML::Comment(it->second);
      }
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace {

// A value as one line of YAML: scalars as they are, sequences and maps in flow style.
std::string compact_yaml(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out.SetSeqFormat(YAML::Flow);
  out.SetMapFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

// section.key -> value of a resolved config's two levels, in the text's order; empty for anything else.
std::vector<std::pair<std::string, std::string>> flatten_config(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> keys;
  try {
    const YAML::Node root = YAML::Load(text);
    if (!root.IsMap()) return keys;
    for (const auto& section : root) {
      if (!section.second.IsMap()) continue;
      const std::string prefix = section.first.Scalar() + ".";
      for (const auto& key : section.second) keys.emplace_back(prefix + key.first.Scalar(), compact_yaml(key.second));
    }
  } catch (const YAML::Exception&) {
    keys.clear();
  }
  return keys;
}

std::string shortened(const std::string& value) {
  constexpr std::size_t kMax = 40;
  if (value.empty()) return "(none)";
  return value.size() <= kMax ? value : value.substr(0, kMax - 3) + "...";
}

}  // namespace

std::vector<ConfigDifference> config_differences(const std::string& before_yaml, const std::string& after_yaml) {
  const auto before = flatten_config(before_yaml);
  const auto after = flatten_config(after_yaml);
  std::map<std::string, std::string> before_values(before.begin(), before.end());
  std::vector<ConfigDifference> differences;
  for (const auto& [key, value] : after) {
    const auto it = before_values.find(key);
    if (it == before_values.end()) {
      differences.push_back({key, "", value});
      continue;
    }
    if (it->second != value) differences.push_back({key, it->second, value});
    before_values.erase(it);
  }
  for (const auto& [key, value] : before) {
    if (before_values.count(key)) differences.push_back({key, value, ""});
  }
  return differences;
}

std::string describe_config_differences(const std::vector<ConfigDifference>& differences, std::size_t limit) {
  std::string text;
  for (std::size_t i = 0; i < differences.size() && i < limit; ++i) {
    const ConfigDifference& d = differences[i];
    text += fmt::format("{}{} {} -> {}", i ? ", " : "", d.key, shortened(d.before), shortened(d.after));
  }
  if (differences.size() > limit) text += fmt::format(" and {} more", differences.size() - limit);
  return text;
}

}  // namespace mgtrain
