// JSON strings (see json_text.hpp). nlohmann::json is header-only; util uses it here and nowhere else.
#include "util/json_text.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

namespace mgtrain {

std::string json_string(std::string_view text) { return json_text(nlohmann::json(std::string(text))); }

nlohmann::ordered_json json_number(double value) {
  return std::isfinite(value) ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json json_seconds(double seconds) { return json_number(std::round(seconds * 1000.0) / 1000.0); }

}  // namespace mgtrain
