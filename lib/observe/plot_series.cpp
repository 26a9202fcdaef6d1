// Writes and parses the plot hand-over text (see plot_series.hpp).
#include "observe/plot_series.hpp"

#include <cmath>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/strings.hpp"

namespace mgtrain {
namespace {

constexpr const char* kHeader = "mgtrain-plot 1";

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

}  // namespace

std::string plot_spec_to_text(const PlotSpec& spec) {
  std::string out = std::string(kHeader) + "\n";
  out += "title " + one_line(spec.title) + "\n";
  out += "xlabel " + one_line(spec.x_label) + "\n";
  out += "ylabel " + one_line(spec.y_label) + "\n";
  for (const PlotSeries& series : spec.series) {
    out += "series " + one_line(series.name) + "\n";
    for (const auto& [x, y] : series.points) out += fmt::format("{:.17g} {:.17g}\n", x, y);
  }
  out += "end\n";
  return out;
}

PlotSpec parse_plot_spec(const std::string& text) {
  PlotSpec spec;
  std::size_t line_number = 0;
  bool ended = false;
  auto fail = [&line_number](const std::string& why) -> UsageError {
    return UsageError(
        fmt::format("plot data (stdin) line {}: {}; mgtrain-plot reads what `mgtrain plot` writes "
                    "(docs/monitoring.md#plots)",
                    line_number, why));
  };
  for (const std::string& line : split_lines(text)) {
    if (ended) break;  // what follows 'end' is not read
    ++line_number;
    if (line_number == 1) {
      if (line != kHeader) throw fail(fmt::format("expected '{}', found '{}'", kHeader, line.substr(0, 40)));
      continue;
    }
    auto after = [&line](const char* word) -> std::optional<std::string> {
      const std::string prefix = std::string(word) + " ";
      if (starts_with(line, prefix)) return line.substr(prefix.size());
      if (line == word) return std::string();
      return std::nullopt;
    };
    if (auto v = after("title")) {
      spec.title = *v;
    } else if (auto v = after("xlabel")) {
      spec.x_label = *v;
    } else if (auto v = after("ylabel")) {
      spec.y_label = *v;
    } else if (auto v = after("series")) {
      spec.series.push_back({*v, {}});
    } else if (line == "end") {
      ended = true;
    } else {
      if (spec.series.empty()) throw fail(fmt::format("'{}' before any 'series' line", line.substr(0, 40)));
      const char* begin = line.c_str();
      char* after_x = nullptr;
      char* after_y = nullptr;
      const double x = std::strtod(begin, &after_x);
      const double y = std::strtod(after_x, &after_y);
      if (after_x == begin || after_y == after_x || *after_y != '\0')
        throw fail(fmt::format("'{}' is not 'x y'", line.substr(0, 40)));
      if (!std::isfinite(x) || !std::isfinite(y)) throw fail("a point that is not finite");
      spec.series.back().points.emplace_back(x, y);
    }
  }
  if (line_number == 0) throw UsageError("plot data (stdin) is empty; mgtrain-plot reads what `mgtrain plot` writes");
  if (!ended) throw fail("the data ends without 'end' (cut short?)");
  return spec;
}

}  // namespace mgtrain
