// The one way mgtrain turns JSON into text: a nlohmann::json value compact (indent -1) or indented, and one
// string quoted and escaped (json_string, for hand-built JSON and messages). Invalid UTF-8 in strings (a worker's
// stderr, a user's path) becomes U+FFFD instead of nlohmann's default exception. Also the numbers every JSON file
// of mgtrain writes the same way (json_number, json_seconds).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace mgtrain {

template <class Json>
std::string json_text(const Json& value, int indent = -1) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// `text` as a JSON string with its quotes: "a\"b\n" -> "\"a\\\"b\\n\"" (json_text of the string).
std::string json_string(std::string_view text);

// `value` as a JSON number; NaN and infinity, which JSON lacks, as null.
nlohmann::ordered_json json_number(double value);
// Seconds (a Unix time or a duration) kept to the millisecond, as run.json, metrics.jsonl and `mgtrain runs --json`
// write them; null when not finite.
nlohmann::ordered_json json_seconds(double seconds);

}  // namespace mgtrain
