// CLI11's help laid out for the terminal's width (see help_formatter.hpp). CLI11 2.1 pads option names to a column
// and never wraps; this formatter keeps its sections and order and wraps each part with help_layout.
#include "cli/help_formatter.hpp"

#include <algorithm>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/help_layout.hpp"

namespace mgtrain::cli_detail {
namespace {

constexpr std::size_t kUsageIndent = 7;  // "Usage: "

class WrappingFormatter final : public CLI::Formatter {
 public:
  explicit WrappingFormatter(std::size_t width) : width_(width) {
    column_width(std::min<std::size_t>(30, width * 3 / 8));
  }

  std::string make_option(const CLI::Option* option, bool is_positional) const override {
    return list_entry(make_option_name(option, is_positional) + make_option_opts(option), make_option_desc(option),
                      width_, column_width_);
  }

  std::string make_subcommand(const CLI::App* sub) const override {
    return list_entry(sub->get_display_name(true), sub->get_description(), width_, column_width_);
  }

  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string usage = Formatter::make_usage(app, std::move(name));
    while (!usage.empty() && usage.back() == '\n') usage.pop_back();
    return wrap_words(usage, width_, 0, kUsageIndent);
  }

  std::string make_description(const CLI::App* app) const override {
    return wrap_lines(Formatter::make_description(app), width_);
  }

  std::string make_footer(const CLI::App* app) const override {
    return wrap_lines(Formatter::make_footer(app), width_);
  }

 private:
  std::size_t width_;
};

}  // namespace

std::shared_ptr<CLI::FormatterBase> wrapping_formatter(std::size_t width) {
  return std::make_shared<WrappingFormatter>(width);
}

}  // namespace mgtrain::cli_detail
