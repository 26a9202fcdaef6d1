// Strict text-to-value conversions (see value_parsing.hpp).
#include "util/value_parsing.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace mgtrain {

std::string trim(const std::string& text) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  auto begin = std::find_if(text.begin(), text.end(), not_space);
  auto end = std::find_if(text.rbegin(), text.rend(), not_space).base();
  return begin < end ? std::string(begin, end) : std::string();
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string::size_type start = 0;
  while (true) {
    auto pos = text.find(separator, start);
    parts.push_back(text.substr(start, pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return parts;
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<std::uint64_t> parse_digits(std::string_view text) {
  if (!all_digits(text)) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (__builtin_mul_overflow(value, 10u, &value) ||
        __builtin_add_overflow(value, static_cast<unsigned>(c - '0'), &value)) {
      return std::nullopt;
    }
  }
  return value;
}

std::optional<std::uint64_t> parse_digits(std::string_view text, std::size_t max_digits) {
  if (text.size() > max_digits) return std::nullopt;
  return parse_digits(text);
}

std::optional<std::int64_t> parse_int(const std::string& raw) {
  std::string text = trim(raw);
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return static_cast<std::int64_t>(value);
}

std::optional<double> parse_number(const std::string& raw) {
  std::string text = trim(raw);
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::string format_number(double value) {
  // The shortest text that reads back as the same double (fmt's default for floats): 30 -> "30", 0.1 -> "0.1".
  std::string text = fmt::format("{}", value);
  // Keep it a float for YAML readers: "5" -> "5.0".
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::optional<bool> parse_bool(const std::string& raw) {
  std::string text = trim(raw);
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  if (text == "true" || text == "yes" || text == "on" || text == "1") return true;
  if (text == "false" || text == "no" || text == "off" || text == "0") return false;
  return std::nullopt;
}

}  // namespace mgtrain
