// Small text helpers that every library needs (C++17 has no std::string::starts_with): prefix and suffix tests,
// and a tensor shape as text. Parsing text into values is in value_parsing.hpp; JSON strings in json_text.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mgtrain {

bool starts_with(std::string_view text, std::string_view prefix);
bool ends_with(std::string_view text, std::string_view suffix);

// "[2, 3]", "[]" for a scalar: a tensor's shape in messages. Torch-free: LibTorch callers pass sizes().vec().
std::string shape_text(const std::vector<std::int64_t>& shape);

}  // namespace mgtrain
