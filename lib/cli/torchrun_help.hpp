// Private to lib/cli: the torchrun personality's --help, as torchrun 2.15's argparse help reads (its usage line,
// positional arguments, options with torchrun's spellings, metavars and defaults), made from torchrun_options()'s
// rows and laid out for the terminal's width, with mgtrain's notes where it differs.
#pragma once

#include <cstddef>
#include <string>

namespace mgtrain::cli_detail {

// `program` is what the user typed: "torchrun" (a link) or "mgtrain torchrun".
std::string torchrun_help(const std::string& program, std::size_t width);

// "usage: torchrun [-h] [--nnodes NNODES] ... training_script ..." wrapped to `width`, as argparse wraps it.
std::string torchrun_usage(const std::string& program, std::size_t width);

}  // namespace mgtrain::cli_detail
