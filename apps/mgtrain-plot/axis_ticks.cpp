// Computes nice axis ticks and their labels (see axis_ticks.hpp).
#include "axis_ticks.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace mgtrain::plot {

AxisTicks nice_ticks(double minimum, double maximum, int wanted) {
  if (maximum < minimum) std::swap(minimum, maximum);
  if (maximum - minimum < 1e-12 * std::max(1.0, std::fabs(maximum))) {
    const double pad = minimum == 0 ? 1.0 : std::fabs(minimum) * 0.1;
    minimum -= pad;
    maximum += pad;
  }
  const double rough = (maximum - minimum) / std::max(1, wanted);
  const double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * magnitude;
    if (step >= rough) break;
  }
  AxisTicks ticks;
  ticks.step = step;
  ticks.low = std::floor(minimum / step + 1e-9) * step;
  ticks.high = std::ceil(maximum / step - 1e-9) * step;
  for (double v = ticks.low; v <= ticks.high + step * 1e-6; v += step)
    ticks.values.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return ticks;
}

std::string tick_label(double value, double step) {
  const double magnitude = std::max(std::fabs(value), std::fabs(step));
  if (magnitude >= 1e6 || (magnitude < 1e-3 && value != 0)) return fmt::format("{:.3g}", value);
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  return fmt::format("{:.{}f}", value, decimals);
}

}  // namespace mgtrain::plot
