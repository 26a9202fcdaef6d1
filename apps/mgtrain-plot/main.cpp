// Entry point of `mgtrain-plot`, the renderer behind `mgtrain plot`: reads the curves from stdin
// (observe/plot_series.hpp), draws them with cairo and writes OUT.png or OUT.svg. A separate binary so that the
// launcher `mgtrain` never loads cairo (docs/monitoring.md#plots). Usage:
//   mgtrain-plot --output OUT.png|OUT.svg [--width PX] [--height PX] < data
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "observe/plot_series.hpp"
#include "plot_renderer.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace {

struct Options {
  std::string output;
  int width = 960;
  int height = 600;
};

int size_argument(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 200 || value > 10000) {
    throw mgtrain::UsageError(fmt::format("{} {}: give a size in pixels from 200 to 10000", flag, text));
  }
  return value;
}

Options parse_arguments(const std::vector<std::string>& args) {
  Options options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const bool has_value = i + 1 < args.size();
    if ((arg == "-o" || arg == "--output") && has_value) {
      options.output = args[++i];
    } else if (arg == "--width" && has_value) {
      options.width = size_argument(arg, args[++i]);
    } else if (arg == "--height" && has_value) {
      options.height = size_argument(arg, args[++i]);
    } else {
      throw mgtrain::UsageError(
          fmt::format("unexpected argument '{}'; usage: mgtrain-plot --output OUT.png|OUT.svg [--width PX] "
                      "[--height PX] < data (normally run by `mgtrain plot`)",
                      arg));
    }
  }
  if (options.output.empty()) throw mgtrain::UsageError("give the image to write with --output OUT.png or OUT.svg");
  return options;
}

std::string read_stdin() {
  std::string text;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(0, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw mgtrain::SystemError("cannot read the plot data from stdin", errno);
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  return mgtrain::log::run_main("mgtrain-plot", [&] {
    const Options options = parse_arguments(std::vector<std::string>(argv + 1, argv + argc));
    mgtrain::plot::format_of(options.output);  // refuse a bad name before reading anything
    const mgtrain::PlotSpec spec = mgtrain::parse_plot_spec(read_stdin());
    std::size_t points = 0;
    for (const auto& series : spec.series) points += series.points.size();
    if (points == 0) throw mgtrain::UsageError("the plot data holds no points: nothing to draw");
    mgtrain::plot::render_plot_file(spec, options.output, options.width, options.height);
    mgtrain::log::progress("wrote {} ({}x{}, {} series, {} points)", options.output, options.width, options.height,
                           spec.series.size(), points);
    return mgtrain::exit_code::kSuccess;
  });
}
