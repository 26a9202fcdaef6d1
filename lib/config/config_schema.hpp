// The one schema of the config: every key's path, type, default, allowed values and one-line doc,
// bound to its member of Config. Loading, validation, `config show`, `config init` and docs/config.md
// are all driven by this table (the keys are in config_schema_keys.cpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config.hpp"

namespace mgtrain {

// Thrown by a KeyDef when a value does not fit; the loader adds the location and key path.
struct ValueError {
  std::string message;
};

struct KeyDef {
  std::string path;                  // "train.batch_size"
  std::string type_name;             // "integer", "number", "boolean", "string", "list of integers"
  std::string doc;                   // one line
  std::vector<std::string> choices;  // non-empty: the value must be one of these
  bool choices_open = false;         // true: choices are suggestions, any other value also passes the check
  std::optional<double> min, max;    // inclusive bounds for numbers (and list elements)
  std::string constraint;            // human text for a custom check, e.g. "N, auto, gpu or cpu"
  // Converts `node`, validates it and stores it into `config`. Throws ValueError.
  std::function<void(Config&, const YAML::Node&)> assign;
  // The current value as a YAML node.
  std::function<YAML::Node(const Config&)> read;

  std::string section() const { return path.substr(0, path.find('.')); }
  // "1 to 65535", "one of: sgd, adam, adamw", ... ; empty when unconstrained.
  std::string allowed_text() const;
};

// All keys, in documentation order.
const std::vector<KeyDef>& config_schema();

// The key with this path, or nullptr.
const KeyDef* find_key(const std::string& path);

// Section names in order: launch, model, data, train, optim, ddp, checkpoint, log.
const std::vector<std::string>& config_sections();

// One-line description of a section.
std::string section_doc(const std::string& section);

// MGTRAIN_TRAIN_BATCH_SIZE for train.batch_size.
std::string env_name_for_key(const std::string& path);

}  // namespace mgtrain
