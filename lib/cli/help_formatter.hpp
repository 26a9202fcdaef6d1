// Private to lib/cli: the CLI11 formatter of `mgtrain --help`, `mgtrain launch --help` and every other subcommand's
// help, laid out for the terminal's width (help_layout.hpp): options and subcommands in two columns with wrapped
// descriptions, the usage line, description and footer wrapped.
#pragma once

#include <cstddef>
#include <memory>

namespace CLI {
class FormatterBase;
}

namespace mgtrain::cli_detail {

// A formatter for lines of at most `width` columns (a word longer than a line excepted).
std::shared_ptr<CLI::FormatterBase> wrapping_formatter(std::size_t width);

}  // namespace mgtrain::cli_detail
