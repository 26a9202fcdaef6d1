// "Nice" axis ticks for the plot renderer: steps of 1, 2 or 5 times a power of ten covering a data range.
#pragma once

#include <string>
#include <vector>

namespace mgtrain::plot {

struct AxisTicks {
  double low = 0;   // the axis starts here (a tick, at or below the data's minimum)
  double high = 1;  // and ends here (a tick, at or above the maximum)
  double step = 1;
  std::vector<double> values;
};

// About `wanted` ticks covering [minimum, maximum]; an empty range is widened around its value.
AxisTicks nice_ticks(double minimum, double maximum, int wanted);

// A tick's label: as short as the step allows ("0.25", "1e+04", "1500").
std::string tick_label(double value, double step);

}  // namespace mgtrain::plot
