// Rendering console line prefixes, with torch's template syntax (Python string.Template).
#include "output/line_prefix.hpp"

#include <cctype>

#include "util/did_you_mean.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

const std::vector<std::string> kPlaceholders = {"role_name", "rank", "local_rank", "hostname"};

// Python's idpattern: [_a-z][_a-z0-9]* (ASCII, case-insensitive).
bool identifier_start(char c) { return c == '_' || std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool identifier_char(char c) { return identifier_start(c) || std::isdigit(static_cast<unsigned char>(c)) != 0; }

void check_known(const std::string& name, const std::string& spelled, const std::string& text,
                 const std::string& source) {
  for (const std::string& known : kPlaceholders) {
    if (name == known) return;
  }
  throw UsageError(source + ": unknown placeholder " + spelled + " in '" + text + "'" +
                   did_you_mean_suffix(name, kPlaceholders) +
                   ": use ${role_name}, ${rank}, ${local_rank} or ${hostname}, and $$ for a literal $");
}

}  // namespace

LinePrefix LinePrefix::from_template(const std::string& text, const std::string& source) {
  std::vector<Part> parts;
  auto literal = [&parts](std::string_view piece) {
    if (parts.empty() || parts.back().placeholder) parts.push_back(Part{false, ""});
    parts.back().text.append(piece);
  };
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t dollar = text.find('$', at);
    if (dollar == std::string::npos) {
      literal(std::string_view(text).substr(at));
      break;
    }
    literal(std::string_view(text).substr(at, dollar - at));
    const std::size_t next = dollar + 1;
    if (next < text.size() && text[next] == '$') {  // "$$"
      literal("$");
      at = next + 1;
    } else if (next < text.size() && text[next] == '{') {
      std::size_t end = next + 1;
      while (end < text.size() && identifier_char(text[end])) ++end;
      if (end == next + 1 || !identifier_start(text[next + 1]) || end >= text.size() || text[end] != '}') {
        throw UsageError(source + ": '" + text + "': \"${\" at offset " + std::to_string(dollar) +
                         " is not followed by a placeholder name and '}': write e.g. ${rank}, or $$ for a literal $");
      }
      const std::string name = text.substr(next + 1, end - next - 1);
      check_known(name, text.substr(dollar, end + 1 - dollar), text, source);
      parts.push_back(Part{true, name});
      at = end + 1;
    } else if (next < text.size() && identifier_start(text[next])) {
      std::size_t end = next;
      while (end < text.size() && identifier_char(text[end])) ++end;
      const std::string name = text.substr(next, end - next);
      check_known(name, "$" + name, text, source);
      parts.push_back(Part{true, name});
      at = end;
    } else {  // a "$" that starts nothing: Python keeps it
      literal("$");
      at = next;
    }
  }
  LinePrefix prefix;
  prefix.template_ = std::move(parts);
  return prefix;
}

LinePrefix LinePrefix::from_setting(const std::optional<std::string>& value, const std::string& source) {
  if (!value || value->empty()) return LinePrefix();
  return from_template(*value, source);
}

std::string LinePrefix::render(const PrefixFields& fields) const {
  if (!template_) return "[rank " + std::to_string(fields.rank) + "] ";
  std::string out;
  for (const Part& part : *template_) {
    if (!part.placeholder) {
      out += part.text;
    } else if (part.text == "role_name") {
      out += fields.role_name;
    } else if (part.text == "rank") {
      out += std::to_string(fields.rank);
    } else if (part.text == "local_rank") {
      out += std::to_string(fields.local_rank);
    } else {
      out += fields.hostname;
    }
  }
  return out;
}

std::string console_prefix(const LinePrefix& configured, bool torchrun_console, bool teed, const PrefixFields& fields) {
  if (!torchrun_console) return configured.render(fields);
  if (!teed) return "";
  if (configured.is_template()) return configured.render(fields);
  return "[" + fields.role_name + std::to_string(fields.local_rank) + "]:";
}

}  // namespace mgtrain
