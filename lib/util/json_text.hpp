// The one way mgtrain turns a nlohmann::json value into text: compact (indent -1) or indented, and invalid
// UTF-8 in strings (a worker's stderr, a user's path) becomes U+FFFD instead of nlohmann's default exception.
#pragma once

#include <string>

namespace mgtrain {

template <class Json>
std::string json_text(const Json& value, int indent = -1) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace mgtrain
