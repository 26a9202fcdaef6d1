// Bounded, single-document YAML parsing with plain parser messages (see yaml_document.hpp). Three passes over the
// text: a scan of the flow nesting ('[' '{'), yaml-cpp's parser with an event handler that counts documents, depth and
// values (nothing is built), then YAML::Load of the one document.
#include "config/yaml_document.hpp"

#include <cstring>
#include <optional>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

std::string too_deep_text() {
  return fmt::format(
      "nesting deeper than {} levels (lists and mappings inside each other; a config needs 3): close the brackets or "
      "reduce the indentation",
      kMaxYamlDepth);
}

YAML::Mark mark_at(std::size_t pos, int line, std::size_t line_start) {
  YAML::Mark mark;
  mark.pos = static_cast<int>(pos);
  mark.line = line;
  mark.column = static_cast<int>(pos - line_start);
  return mark;
}

// Where flow collections ('[' '{') first nest deeper than kMaxYamlDepth, or nullopt. yaml-cpp's scanner reads a
// whole flow collection ahead before its parser sees the first level, so this runs on the text: it knows quotes,
// comments, block scalars (| >) and which '[' can start a value (in block context only at the start of a value, not
// inside a plain scalar such as `a[1]`; in flow context every one).
class FlowDepthScan {
 public:
  explicit FlowDepthScan(const std::string& text) : text_(text) {}

  std::optional<YAML::Mark> first_too_deep() {
    while (i_ < text_.size()) {
      const char c = text_[i_];
      if (c == '\n') {
        new_line(i_++);
        if (depth_ == 0) node_start_ = true;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else if (c == '#' && (i_ == line_start_ || blank_at(i_ - 1))) {
        while (i_ < text_.size() && text_[i_] != '\n') ++i_;
      } else if (depth_ == 0 && i_ == line_start_ && text_.compare(i_, 3, "---") == 0 && blank_at(i_ + 3)) {
        i_ += 3;
        node_start_ = true;
      } else if (node_start_ && (c == '\'' || c == '"')) {
        skip_quoted(c);
        node_start_ = false;
      } else if (node_start_ && depth_ == 0 && (c == '|' || c == '>')) {
        skip_block_scalar();
      } else if (node_start_ && (c == '&' || c == '!')) {
        while (!blank_at(i_) && (depth_ == 0 || std::strchr(",[]{}", text_[i_]) == nullptr)) ++i_;
      } else if (c == '[' || c == '{') {
        if (depth_ > 0 || node_start_) {
          if (++depth_ > kMaxYamlDepth) return mark_at(i_, line_, line_start_);
          node_start_ = true;
        } else {
          node_start_ = false;  // inside a plain scalar: a[1]
        }
        ++i_;
      } else if ((c == ']' || c == '}') && depth_ > 0) {
        --depth_;
        node_start_ = false;
        ++i_;
      } else if (starts_value(c)) {
        node_start_ = true;
        ++i_;
      } else {
        node_start_ = false;
        ++i_;
      }
    }
    return std::nullopt;
  }

 private:
  // Whether a value may begin after `c` at i_: after ',' ':' '?' in flow context; after ": ", and "- " or "? " at a
  // value's start, in block context.
  bool starts_value(char c) const {
    if (depth_ > 0 && (c == ',' || c == ':' || c == '?')) return true;
    return (c == ':' || (node_start_ && (c == '-' || c == '?'))) && blank_at(i_ + 1);
  }
  bool blank_at(std::size_t at) const {
    return at >= text_.size() || text_[at] == ' ' || text_[at] == '\t' || text_[at] == '\n' || text_[at] == '\r';
  }
  void new_line(std::size_t newline_at) {
    ++line_;
    line_start_ = newline_at + 1;
  }
  // From the opening quote to after the closing one ('' and \" do not close).
  void skip_quoted(char quote) {
    for (++i_; i_ < text_.size(); ++i_) {
      const char c = text_[i_];
      if (c == '\n') {
        new_line(i_);
      } else if (quote == '"' && c == '\\') {
        if (i_ + 1 < text_.size() && text_[i_ + 1] == '\n') new_line(i_ + 1);
        ++i_;
      } else if (c == quote) {
        if (quote == '\'' && i_ + 1 < text_.size() && text_[i_ + 1] == '\'') {
          ++i_;
        } else {
          ++i_;
          return;
        }
      }
    }
  }
  std::size_t indent_of_line(std::size_t start) const {
    std::size_t at = start;
    while (at < text_.size() && text_[at] == ' ') ++at;
    return at - start;
  }
  // `| ...` or `> ...`: the rest of its line, then every line more indented than the indicator's line (or blank).
  void skip_block_scalar() {
    const std::size_t indent = indent_of_line(line_start_);
    while (i_ < text_.size() && text_[i_] != '\n') ++i_;
    while (i_ < text_.size()) {  // at a '\n'
      const std::size_t next = i_ + 1;
      const std::size_t next_indent = indent_of_line(next);
      const std::size_t content = next + next_indent;
      const bool blank_line = content >= text_.size() || text_[content] == '\n' || text_[content] == '\r';
      if (!blank_line && next_indent <= indent) break;
      new_line(i_);
      i_ = next;
      while (i_ < text_.size() && text_[i_] != '\n') ++i_;
    }
    node_start_ = false;
  }

  const std::string& text_;
  std::size_t i_ = 0;
  int line_ = 0;
  std::size_t line_start_ = 0;
  int depth_ = 0;
  bool node_start_ = true;
};

// A refusal raised from inside yaml-cpp's parser by the event handler.
struct Refusal {
  YAML::Mark mark;
  std::string message;
};

// Counts documents, nesting and values as the parser reports them; throws Refusal at the first one too many.
class ShapeCheck final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1)
      throw Refusal{mark,
                    "a second YAML document starts here; a config is one document (delete the '---' line and what "
                    "follows, or merge its keys into the first document)"};
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { count(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { count(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override {
    count(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    enter(mark);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    enter(mark);
  }
  void OnMapEnd() override { --depth_; }

 private:
  void count(const YAML::Mark& mark) {
    if (++values_ > kMaxYamlNodes)
      throw Refusal{mark, fmt::format("more than {} values (scalars, lists and mappings); a config has a few hundred",
                                      kMaxYamlNodes)};
  }
  void enter(const YAML::Mark& mark) {
    count(mark);
    if (++depth_ > kMaxYamlDepth) throw Refusal{mark, too_deep_text()};
  }

  int documents_ = 0;
  int depth_ = 0;
  std::size_t values_ = 0;
};

// yaml-cpp's parser messages (YAML::ErrorMsg, 0.7) and what they mean; matched as prefixes (some carry a suffix).
const std::pair<const char*, const char*> kHints[] = {
    {YAML::ErrorMsg::END_OF_MAP_FLOW, "a { } mapping is not closed: expected ',' and another key, or '}'"},
    {YAML::ErrorMsg::END_OF_MAP,
     "a mapping ends in the wrong place: expected another `key: value` line at the mapping's indentation "
     "(check the indentation of this line and the one above)"},
    {YAML::ErrorMsg::END_OF_SEQ_FLOW, "a [ ] list is not closed: expected ',' and another item, or ']'"},
    {YAML::ErrorMsg::END_OF_SEQ,
     "a list ends in the wrong place: expected another `- item` line at the list's indentation (check the "
     "indentation)"},
    {YAML::ErrorMsg::TAB_IN_INDENTATION, "a tab in the indentation: expected spaces (YAML indents with spaces only)"},
    {YAML::ErrorMsg::MAP_VALUE,
     "a ':' where no mapping value can start: expected `key: value` with the key on the same line at the mapping's "
     "indentation (quote a value that contains ': ')"},
    {YAML::ErrorMsg::MAP_KEY, "a mapping key where none can start: expected the indentation of the mapping above"},
    {YAML::ErrorMsg::BLOCK_ENTRY,
     "a `- item` where no list can start: expected it on its own line, indented under its key"},
    {YAML::ErrorMsg::FLOW_END, "a ']' or '}' that closes nothing: expected a value (or delete the bracket)"},
    {YAML::ErrorMsg::UNKNOWN_TOKEN, "expected a value, `key: value`, `- item`, [ ], { } or a # comment here"},
    {YAML::ErrorMsg::EOF_IN_SCALAR, "a quoted value is not closed: expected its closing quote before the end"},
    {YAML::ErrorMsg::DOC_IN_SCALAR,
     "a '---' or '...' line inside a quoted value: expected the closing quote first (or indent the line)"},
    {YAML::ErrorMsg::CHAR_IN_SCALAR, "a character a plain value cannot hold: expected the value in quotes"},
    {YAML::ErrorMsg::SINGLE_QUOTED_CHAR, "a character a single-quoted value cannot hold: expected '' for a quote"},
    {YAML::ErrorMsg::INVALID_ESCAPE,
     "an unknown escape in a double-quoted value: expected \\\\, \\\", \\n, \\t, \\xHH or \\uHHHH (or use single "
     "quotes, which keep \\ as it is)"},
    {YAML::ErrorMsg::INVALID_HEX, "expected hexadecimal digits after \\x, \\u or \\U in a double-quoted value"},
    {YAML::ErrorMsg::INVALID_UNICODE, "an escape that is no Unicode character: expected a code point up to 10FFFF"},
    {YAML::ErrorMsg::ALIAS_NOT_FOUND, "expected an anchor name after '*'"},
    {YAML::ErrorMsg::ANCHOR_NOT_FOUND, "expected an anchor name after '&'"},
    {YAML::ErrorMsg::CHAR_IN_ALIAS, "expected letters, digits, '-' or '_' in an alias name"},
    {YAML::ErrorMsg::CHAR_IN_ANCHOR, "expected letters, digits, '-' or '_' in an anchor name"},
    {YAML::ErrorMsg::UNKNOWN_ANCHOR, "a *alias whose &anchor is not defined above it: expected the &anchor first"},
    {YAML::ErrorMsg::ALIAS_CONTENT, "expected nothing after a *alias but ',', ']', '}' or the end of the line"},
    {YAML::ErrorMsg::MULTIPLE_ANCHORS, "expected at most one &anchor on a value"},
    {YAML::ErrorMsg::MULTIPLE_TAGS, "expected at most one !tag on a value (a config needs none)"},
    {YAML::ErrorMsg::MULTIPLE_ALIASES, "expected at most one *alias for a value"},
    {YAML::ErrorMsg::CHAR_IN_TAG_HANDLE, "expected a tag such as !name (a config needs no tags: delete it)"},
    {YAML::ErrorMsg::TAG_WITH_NO_SUFFIX, "expected a name after the tag handle (a config needs no tags)"},
    {YAML::ErrorMsg::END_OF_VERBATIM_TAG, "expected '>' closing the !<...> tag"},
    {YAML::ErrorMsg::ZERO_INDENT_IN_BLOCK, "expected an indentation digit 1-9 after | or >"},
    {YAML::ErrorMsg::CHAR_IN_BLOCK, "expected only +, - or a digit 1-9 (and a comment) after | or >"},
    {YAML::ErrorMsg::YAML_DIRECTIVE_ARGS, "expected exactly one version after %YAML, e.g. %YAML 1.2"},
    {YAML::ErrorMsg::YAML_VERSION, "expected a version such as 1.2 after %YAML"},
    {YAML::ErrorMsg::YAML_MAJOR_VERSION, "expected YAML 1.x (%YAML 1.2)"},
    {YAML::ErrorMsg::REPEATED_YAML_DIRECTIVE, "expected at most one %YAML line"},
    {YAML::ErrorMsg::TAG_DIRECTIVE_ARGS, "expected a handle and a prefix after %TAG"},
    {YAML::ErrorMsg::REPEATED_TAG_DIRECTIVE, "expected each %TAG handle once"},
    {YAML::ErrorMsg::BAD_FILE, "nesting too deep for the YAML parser: expected at most 64 levels"},
};

// Runs yaml-cpp's parser over every document of `text` with a ShapeCheck. Throws Refusal or YAML::Exception.
void check_shape(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  ShapeCheck check;
  while (parser.HandleNextDocument(check)) {}
}

// The hint for a parser error, which for a line indented with a tab is about the tab (yaml-cpp mostly reports
// another message for it, e.g. "illegal map value").
std::string hint_at(const std::string& text, const YAML::Exception& e) {
  if (!e.mark.is_null() && e.mark.pos >= 0 && static_cast<std::size_t>(e.mark.pos) <= text.size()) {
    const std::size_t start = text.rfind('\n', e.mark.pos == 0 ? 0 : static_cast<std::size_t>(e.mark.pos) - 1);
    std::size_t at = start == std::string::npos ? 0 : start + 1;
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) {
      if (text[at] == '\t') return yaml_parser_hint(YAML::ErrorMsg::TAB_IN_INDENTATION);
      ++at;
    }
  }
  return yaml_parser_hint(e.msg);
}

}  // namespace

std::string yaml_location(const std::string& name, const YAML::Mark& mark) {
  if (mark.is_null()) return name;
  return fmt::format("{}:{}:{}", name, mark.line + 1, mark.column + 1);
}

std::string yaml_parser_hint(const std::string& message) {
  for (const auto& [text, hint] : kHints)
    if (message.compare(0, std::strlen(text), text) == 0) return hint;
  return "the text here is not valid YAML: expected `key: value` lines, `- item` lines, [ ] or { }";
}

YAML::Node load_yaml_document(const std::string& text, const std::function<std::string(const YAML::Mark&)>& locate) {
  const auto malformed = [&](const YAML::Exception& e) {
    return UsageError(fmt::format("{}: malformed YAML: {} (yaml-cpp: {})", locate(e.mark), hint_at(text, e), e.msg));
  };
  // Flow nesting alone past the limit: refused where it passes it (yaml-cpp's marks are unreliable there). The
  // parser's own count below also sees the mappings and block lists around flow collections.
  if (auto mark = FlowDepthScan(text).first_too_deep()) throw UsageError(locate(*mark) + ": " + too_deep_text());
  try {
    check_shape(text);
  } catch (const Refusal& refusal) {
    throw UsageError(locate(refusal.mark) + ": " + refusal.message);
  } catch (const YAML::Exception& e) {
    throw malformed(e);
  }
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw malformed(e);
  }
}

YAML::Node load_yaml_document(const std::string& text, const std::string& name) {
  return load_yaml_document(text, [&name](const YAML::Mark& mark) { return yaml_location(name, mark); });
}

}  // namespace mgtrain
