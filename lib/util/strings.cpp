// Small text helpers (see strings.hpp).
#include "util/strings.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace mgtrain {

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::vector<std::string> split_lines(std::string_view text, char terminator) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(terminator, start);
    if (end == std::string_view::npos) end = text.size();
    lines.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string escape_control_characters(std::string_view text, std::string_view kept) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte >= 0x20 && byte != 0x7f) || kept.find(c) != std::string_view::npos) {
      out += c;
      continue;
    }
    switch (c) {
      case '\0':
        out += "\\0";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += fmt::format("\\x{:02x}", byte);
    }
  }
  return out;
}

std::string rank_runs(std::vector<int> ranks, RankRuns style) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  const bool compact = style == RankRuns::Compact;
  const std::size_t shortest_range = compact ? 2 : 3;
  const char* separator = compact ? "," : ", ";
  std::string text;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (j + 1 - i >= shortest_range) {
      text += (text.empty() ? "" : separator) + std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
      i = j + 1;
    } else {
      text += (text.empty() ? "" : separator) + std::to_string(ranks[i]);
      ++i;
    }
  }
  return text;
}

std::string cut_with_ellipsis(std::string text, std::size_t limit) {
  if (text.size() <= limit) return text;
  std::size_t cut = limit > 3 ? limit - 3 : 0;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  text.resize(cut);
  return text + "...";
}

}  // namespace mgtrain
