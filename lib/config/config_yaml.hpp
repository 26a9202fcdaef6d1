// Writes a Config as YAML: `mgtrain config show`, and the resolved config handed to workers (also stored in every
// checkpoint); and the keys in which two such texts differ (a resume's note).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace mgtrain {

// Every key in schema order, grouped by section. With `origin`, each value gets a comment naming its source.
std::string config_to_yaml(const Config& config, const std::map<std::string, std::string>* origin = nullptr);

// One key whose value differs between two configs, each value as compact YAML ("" when the key is missing there).
struct ConfigDifference {
  std::string key;  // "optim.lr"
  std::string before, after;
};

// The keys (section.key) whose values differ between two config_to_yaml texts, in `after`'s order, then the keys
// only `before` has (a key an older version had). A text that is not such a YAML map counts as having no keys.
std::vector<ConfigDifference> config_differences(const std::string& before_yaml, const std::string& after_yaml);

// "optim.lr 0.1 -> 0.05, train.max_steps 8 -> 16": at most `limit` differences (values cut to 40 characters),
// then "and N more".
std::string describe_config_differences(const std::vector<ConfigDifference>& differences, std::size_t limit = 6);

}  // namespace mgtrain
