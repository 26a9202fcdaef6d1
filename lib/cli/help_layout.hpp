// Private to lib/cli: help text laid out for a terminal's width. Words are wrapped greedily, list entries take two
// columns (the layout of argparse and CLI11), and no line is wider than the width except for a word that is longer
// than a whole line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "util/environment.hpp"

namespace mgtrain::cli_detail {

inline constexpr std::size_t kDefaultHelpWidth = 80;  // stdout is no terminal and COLUMNS is unset
inline constexpr std::size_t kMinHelpWidth = 20;      // a narrower COLUMNS or terminal counts as this

// The width help is laid out for: COLUMNS when it is a positive whole number (as Python's argparse reads it), else
// `terminal_columns` (stdout's terminal; 0 when stdout is no terminal), else 80. At least kMinHelpWidth.
std::size_t help_width(const EnvMap& env, std::size_t terminal_columns);

// The columns `text` takes on a terminal: its UTF-8 code points.
std::size_t display_width(std::string_view text);

// `text`'s words (split at spaces) as lines of at most `width` columns, each ending in '\n': the first line
// indented by `first_indent` spaces, the others by `indent`. A word longer than a line's room stays whole on a line
// of its own. With `break_after_commas`, a line may also break after a comma inside a word ("--a,--b").
std::string wrap_words(std::string_view text, std::size_t width, std::size_t first_indent, std::size_t indent,
                       bool break_after_commas = false);

// `items`, each kept whole and separated by a space, as lines of at most `width` columns laid out as wrap_words does
// (a usage line's "[--nnodes NNODES]" groups). An item wider than a line's room is split at its spaces.
std::string wrap_items(const std::vector<std::string>& items, std::size_t width, std::size_t first_indent,
                       std::size_t indent);

// One entry of a help list: `term` from column 2 and `description` wrapped from column `column`, on the term's line
// when the term ends at least two columns before it, else from the next line. A term wider than the width breaks
// after a comma ("--a A, --b B", "--a,--b VALUE"), its continuation lines indented by 6.
std::string list_entry(std::string_view term, std::string_view description, std::size_t width, std::size_t column);

// Preformatted lines (a footer, examples): a line wider than `width` is wrapped on its own, its continuation lines
// indented as it is, or 4 more when it is a command line (it starts with "mgtrain " or "torchrun "). Lines that fit
// are kept as they are.
std::string wrap_lines(std::string_view text, std::size_t width);

}  // namespace mgtrain::cli_detail
