// Strict text-to-value conversions shared by the config loader and the launcher:
// the whole text must be consumed, so "12abc", "1.5" (as an integer) and "" are rejected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mgtrain {

std::optional<std::int64_t> parse_int(const std::string& text);
std::optional<double> parse_number(const std::string& text);  // finite values only
std::optional<bool> parse_bool(const std::string& text);      // true/false, yes/no, on/off, 1/0
// The shortest text that parses back to exactly `value` (0.01 -> "0.01", 1e-08 -> "1e-08").
std::string format_number(double value);
std::string trim(const std::string& text);
// Whether `text` is one or more ASCII digits (nothing else: no sign, no space).
bool all_digits(std::string_view text);
// The value of a run of ASCII digits (leading zeros allowed); nullopt when `text` is not all_digits or the
// value does not fit in 64 bits.
std::optional<std::uint64_t> parse_digits(std::string_view text);
// The same, but nullopt for more than `max_digits` digits: a bound on what a setting may hold.
std::optional<std::uint64_t> parse_digits(std::string_view text, std::size_t max_digits);
std::vector<std::string> split(const std::string& text, char separator);

}  // namespace mgtrain
