// SLURM hostlist expansion (see hostlist.hpp).
#include "contract/hostlist.hpp"

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

[[noreturn]] void fail(const std::string& expression, const std::string& problem) {
  throw UsageError(fmt::format("hostlist '{}': {}", expression, problem));
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_digit(c)) return false;
  return true;
}

// A number of at most 18 digits (so it fits in 64 bits with room to add one).
unsigned long long to_number(const std::string& digits, const std::string& expression) {
  if (digits.size() > 18) fail(expression, fmt::format("number '{}' is too large", digits));
  unsigned long long value = 0;
  for (char c : digits) value = value * 10 + static_cast<unsigned long long>(c - '0');
  return value;
}

// The items of one bracket group: "01-03,7" -> 01 02 03 7.
std::vector<std::string> expand_group(const std::string& body, const std::string& expression, std::size_t limit) {
  if (body.empty()) fail(expression, "empty brackets []");
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    const std::string item = body.substr(start, comma - start);
    if (item.empty()) fail(expression, fmt::format("empty entry inside [{}]", body));
    const std::size_t dash = item.find('-');
    const std::string lo_text = item.substr(0, dash);
    const std::string hi_text = dash == std::string::npos ? lo_text : item.substr(dash + 1);
    if (!all_digits(lo_text) || !all_digits(hi_text)) {
      fail(expression, fmt::format("'{}' inside [...] is not a number or a range like 01-04 (SLURM hostlists "
                                   "range over numbers only)",
                                   item));
    }
    if (dash == std::string::npos) {
      to_number(lo_text, expression);  // only checks the size
      if (items.size() >= limit) fail(expression, fmt::format("more than {} hosts", limit));
      items.push_back(item);  // a single number stays as written: "007"
    } else {
      const unsigned long long lo = to_number(lo_text, expression), hi = to_number(hi_text, expression);
      if (lo > hi) fail(expression, fmt::format("range '{}' goes backwards", item));
      if (hi - lo >= kMaxHostlistRange) {
        fail(expression, fmt::format("range '{}' spans more than {} hosts", item, kMaxHostlistRange));
      }
      if (items.size() + (hi - lo + 1) > limit) fail(expression, fmt::format("more than {} hosts", limit));
      const int width = static_cast<int>(lo_text.size());  // "08-10": 08 09 10; "8-11": 8 9 10 11
      for (unsigned long long v = lo; v <= hi; ++v) items.push_back(fmt::format("{:0{}}", v, width));
    }
    start = comma + 1;
  }
  return items;
}

// One host expression (no top-level separators): literal text and bracket groups, multiplied out.
void expand_one(const std::string& text, const std::string& expression, std::size_t limit,
                std::vector<std::string>& out) {
  std::vector<std::string> partial = {""};
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ']') fail(expression, "']' without '['");
    if (text[i] != '[') {
      const std::size_t next = text.find_first_of("[]", i);
      const std::string literal = text.substr(i, next == std::string::npos ? std::string::npos : next - i);
      for (auto& p : partial) p += literal;
      i = next == std::string::npos ? text.size() : next;
      continue;
    }
    const std::size_t close = text.find(']', i);
    if (close == std::string::npos) fail(expression, "'[' without ']'");
    const std::string body = text.substr(i + 1, close - i - 1);
    if (body.find('[') != std::string::npos) fail(expression, "nested '['");
    const auto items = expand_group(body, expression, limit);
    if (partial.size() * items.size() + out.size() > limit) fail(expression, fmt::format("more than {} hosts", limit));
    std::vector<std::string> next;
    next.reserve(partial.size() * items.size());
    for (const auto& p : partial)
      for (const auto& item : items) next.push_back(p + item);
    partial = std::move(next);
    i = close + 1;
  }
  for (auto& p : partial) out.push_back(std::move(p));
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expression, std::size_t limit) {
  // Split at top-level commas and whitespace. Whitespace only separates (runs of it, around commas,
  // at the ends); an empty entry between commas, or around a leading/trailing comma, is an error.
  std::vector<std::string> hosts;
  std::string current;
  int depth = 0;
  bool after_comma = true;  // nothing but whitespace since the start or the last comma
  bool seen_any = false;
  auto flush = [&] {
    if (current.empty()) return;
    expand_one(current, expression, limit, hosts);
    current.clear();
    after_comma = false;
    seen_any = true;
  };
  for (char c : expression) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) fail(expression, "']' without '['");
    if (depth > 1) fail(expression, "nested '['");
    if (depth > 0 && is_space(c)) fail(expression, "whitespace inside [...]");
    if (depth == 0 && c == ',') {
      if (current.empty() && after_comma) fail(expression, "empty host expression before ','");
      flush();
      after_comma = true;
      continue;
    }
    if (depth == 0 && is_space(c)) {
      flush();
      continue;
    }
    current += c;
  }
  if (depth != 0) fail(expression, "'[' without ']'");
  if (current.empty() && after_comma) fail(expression, seen_any ? "empty host expression after ','" : "no host names");
  flush();
  return hosts;
}

}  // namespace mgtrain
