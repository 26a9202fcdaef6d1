// SLURM hostlist expansion (see hostlist.hpp).
#include "core/hostlist.hpp"

#include <cctype>

#include <fmt/format.h>

#include "core/error.hpp"

namespace mgtrain {
namespace {

[[noreturn]] void fail(const std::string& expression, const std::string& problem) {
  throw UsageError(fmt::format("hostlist '{}': {}", expression, problem));
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// The items of one bracket group: "01-03,7,a" -> 01 02 03 7 a.
std::vector<std::string> expand_group(const std::string& body, const std::string& expression, std::size_t limit) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    const std::string item = body.substr(start, comma - start);
    if (item.empty()) fail(expression, "empty entry inside [...]");
    const std::size_t dash = item.find('-');
    if (dash == std::string::npos) {
      items.push_back(item);
    } else {
      const std::string lo_text = item.substr(0, dash), hi_text = item.substr(dash + 1);
      if (!all_digits(lo_text) || !all_digits(hi_text) || lo_text.size() > 18 || hi_text.size() > 18) {
        fail(expression, fmt::format("'{}' is not a numeric range like 01-04", item));
      }
      const unsigned long long lo = std::stoull(lo_text), hi = std::stoull(hi_text);
      if (lo > hi) fail(expression, fmt::format("range '{}' goes backwards", item));
      if (hi - lo >= limit || items.size() + (hi - lo + 1) > limit) fail(expression, fmt::format("more than {} hosts", limit));
      const int width = lo_text.size() > 1 && lo_text[0] == '0' ? static_cast<int>(lo_text.size()) : 0;
      for (unsigned long long v = lo; v <= hi; ++v) items.push_back(fmt::format("{:0{}}", v, width));
    }
    start = comma + 1;
  }
  return items;
}

// One host expression without top-level commas: literal text and bracket groups, multiplied out.
void expand_one(const std::string& text, const std::string& expression, std::size_t limit, std::vector<std::string>& out) {
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
  for (auto& p : partial) {
    if (p.empty()) fail(expression, "empty host name");
    out.push_back(std::move(p));
  }
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expression, std::size_t limit) {
  std::vector<std::string> hosts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= expression.size(); ++i) {
    const char c = i < expression.size() ? expression[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) fail(expression, "']' without '['");
    if (c == ',' && depth == 0) {
      const std::string part = expression.substr(start, i - start);
      if (part.empty()) fail(expression, "empty host expression between commas");
      expand_one(part, expression, limit, hosts);
      start = i + 1;
    }
  }
  if (depth != 0) fail(expression, "'[' without ']'");
  return hosts;
}

}  // namespace mgtrain
