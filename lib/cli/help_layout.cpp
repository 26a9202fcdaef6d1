// Help text laid out for a terminal's width (see help_layout.hpp): greedy word wrapping of pieces, where a piece is
// a word, or the part of a word up to a comma where a line may break.
#include "cli/help_layout.hpp"

#include <algorithm>
#include <vector>

#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain::cli_detail {
namespace {

struct Piece {
  std::string_view text;
  bool joined;  // no space before it: it continues the word of the piece before (which ended in a comma)
};

// The pieces of `word`: the word itself, or with `after_commas` its parts each ending in a comma.
void add_word(std::string_view word, bool after_commas, bool joined, std::vector<Piece>& pieces) {
  std::size_t start = 0;
  if (after_commas) {
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      if (word[i] != ',') continue;
      pieces.push_back({word.substr(start, i + 1 - start), start == 0 ? joined : true});
      start = i + 1;
    }
  }
  pieces.push_back({word.substr(start), start == 0 ? joined : true});
}

std::vector<Piece> words_of(std::string_view text, bool after_commas) {
  std::vector<Piece> pieces;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    std::size_t end = text.find(' ', i);
    if (end == std::string_view::npos) end = text.size();
    if (i < end) add_word(text.substr(i, end - i), after_commas, false, pieces);
    i = end;
  }
  return pieces;
}

// The first comma of `text` at or after `start` that is not inside {...} (argparse's choices), or npos.
std::size_t item_comma(std::string_view text, std::size_t start) {
  int depth = 0;
  for (std::size_t i = start; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && depth > 0) --depth;
    if (text[i] == ',' && depth == 0) return i;
  }
  return std::string_view::npos;
}

// A list entry's term: one piece per comma-separated item ("--a A," then "--b B"; "--a," then "--b VALUE"); an item
// that cannot fit on a line of its own is split at its spaces.
std::vector<Piece> term_pieces(std::string_view term, std::size_t room) {
  std::vector<Piece> pieces;
  std::size_t start = 0;
  bool joined = false;
  while (start < term.size()) {
    std::size_t comma = item_comma(term, start);
    const std::size_t end = comma == std::string_view::npos ? term.size() : comma + 1;
    const std::string_view item = term.substr(start, end - start);
    if (display_width(item) > room) {
      const std::vector<Piece> words = words_of(item, false);
      for (std::size_t i = 0; i < words.size(); ++i) pieces.push_back({words[i].text, i == 0 ? joined : false});
    } else if (!item.empty()) {
      pieces.push_back({item, joined});
    }
    start = end;
    joined = true;
    if (start < term.size() && term[start] == ' ') {
      joined = false;
      while (start < term.size() && term[start] == ' ') ++start;
    }
  }
  return pieces;
}

std::string lay_out(const std::vector<Piece>& pieces, std::size_t width, std::size_t first_indent, std::size_t indent) {
  std::string out;
  std::string line;
  std::size_t line_indent = first_indent;
  std::size_t line_width = 0;
  auto flush = [&] {
    out += std::string(line_indent, ' ') + line + '\n';
    line.clear();
    line_width = 0;
    line_indent = indent;
  };
  for (const Piece& piece : pieces) {
    const std::size_t piece_width = display_width(piece.text);
    std::size_t glue = !line.empty() && !piece.joined ? 1 : 0;
    if (!line.empty() && line_indent + line_width + glue + piece_width > width) {
      flush();
      glue = 0;
    }
    if (glue) line += ' ';
    line += piece.text;
    line_width += glue + piece_width;
  }
  if (!line.empty()) flush();
  return out;
}

// Each line of `text` wrapped: the first with `first_indent`, every other (and their continuations) with `indent`.
std::string wrap_paragraphs(std::string_view text, std::size_t width, std::size_t first_indent, std::size_t indent) {
  std::string out;
  std::size_t start = 0;
  bool first = true;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view paragraph = text.substr(start, end - start);
    const std::string lines = wrap_words(paragraph, width, first ? first_indent : indent, indent);
    out += lines.empty() && !first ? "\n" : lines;
    first = false;
    start = end + 1;
  }
  return out;
}

}  // namespace

std::size_t help_width(const EnvMap& env, std::size_t terminal_columns) {
  std::size_t width = kDefaultHelpWidth;
  const auto columns = environment_value(env, "COLUMNS");
  const auto number = columns ? parse_int(trim(*columns)) : std::nullopt;
  if (number && *number > 0) {
    width = static_cast<std::size_t>(*number);
  } else if (terminal_columns > 0) {
    width = terminal_columns;
  }
  return std::max(width, kMinHelpWidth);
}

std::size_t display_width(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0u) != 0x80u; }));
}

std::string wrap_words(std::string_view text, std::size_t width, std::size_t first_indent, std::size_t indent,
                       bool break_after_commas) {
  return lay_out(words_of(text, break_after_commas), width, first_indent, indent);
}

std::string wrap_items(const std::vector<std::string>& items, std::size_t width, std::size_t first_indent,
                       std::size_t indent) {
  std::vector<Piece> pieces;
  const std::size_t room = width - std::min(width, indent);
  for (const auto& item : items) {
    if (display_width(item) <= room) {
      pieces.push_back({item, false});
    } else {
      for (const Piece& word : words_of(item, false)) pieces.push_back(word);
    }
  }
  return lay_out(pieces, width, first_indent, indent);
}

std::string list_entry(std::string_view term, std::string_view description, std::size_t width, std::size_t column) {
  constexpr std::size_t kIndent = 2;
  constexpr std::size_t kTermContinuation = 6;
  column = std::min(column, width > 12 ? width - 10 : kIndent);  // room for ten columns of description at least
  std::string out =
      lay_out(term_pieces(term, width - std::min(width, kTermContinuation)), width, kIndent, kTermContinuation);
  if (description.empty()) return out;
  const std::size_t last_start = out.rfind('\n', out.size() - 2);
  const std::size_t term_end =
      display_width(std::string_view(out).substr(last_start == std::string::npos ? 0 : last_start + 1)) - 1;
  std::string text = wrap_paragraphs(description, width, column, column);
  const bool starts_at_column = text.compare(0, column, std::string(column, ' ')) == 0;
  if (last_start == std::string::npos && term_end + 2 <= column && starts_at_column) {
    out.pop_back();  // the term's '\n': the description starts on its line
    out += text.substr(term_end);
  } else {
    out += text;
  }
  return out;
}

std::string wrap_lines(std::string_view text, std::size_t width) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    const bool has_newline = end != std::string_view::npos;
    if (!has_newline) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    if (display_width(line) <= width) {
      out += line;
      if (has_newline) out += '\n';
    } else {
      const std::size_t indent = std::min(line.find_first_not_of(' '), line.size());
      const std::string_view content = line.substr(indent);
      const bool command = starts_with(content, "mgtrain ") || starts_with(content, "torchrun ");
      std::string wrapped = wrap_words(content, width, indent, indent + (command ? 4 : 0));
      if (!has_newline && !wrapped.empty()) wrapped.pop_back();
      out += wrapped;
    }
    start = end + 1;
  }
  return out;
}

}  // namespace mgtrain::cli_detail
