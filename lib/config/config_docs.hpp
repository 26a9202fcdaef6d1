// docs/config.md, generated from the schema (`mgtrain config docs`); a test keeps the file in sync.
#pragma once

#include <string>

namespace mgtrain {

std::string config_reference_markdown();

}  // namespace mgtrain
