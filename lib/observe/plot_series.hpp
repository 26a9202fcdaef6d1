// What `mgtrain plot` hands to the renderer `mgtrain-plot` on its stdin: a title, axis labels and named
// series of (x, y) points, as plain text (docs/monitoring.md#plots):
//   mgtrain-plot 1
//   title <text>
//   xlabel <text>
//   ylabel <text>
//   series <name>          (then one "x y" line per point, %.17g)
//   ...
//   end
// Both sides live here so the format has one definition.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mgtrain {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), finite
};

struct PlotSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<PlotSeries> series;
};

// Newlines in names and labels become spaces.
std::string plot_spec_to_text(const PlotSpec& spec);
// Throws UsageError naming the line that is wrong.
PlotSpec parse_plot_spec(const std::string& text);

}  // namespace mgtrain
