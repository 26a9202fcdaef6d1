// Emits a Config as YAML in schema order (see config_yaml.hpp).
#include "config/config_yaml.hpp"

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

}  // namespace mgtrain
