// Writes a Config as YAML: `mgtrain config show`, and the resolved config handed to workers.
#pragma once

#include <map>
#include <string>

#include "config/config.hpp"

namespace mgtrain {

// Every key in schema order, grouped by section. With `origin`, each value gets a comment naming its source.
std::string config_to_yaml(const Config& config, const std::map<std::string, std::string>* origin = nullptr);

}  // namespace mgtrain
