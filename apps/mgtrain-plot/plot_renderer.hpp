// Draws a PlotSpec (observe/plot_series.hpp) with cairo: title, axes with ticks and labels, grid, one coloured
// line per series, and a legend; and writes it as PNG or SVG.
#pragma once

#include <string>

#include "observe/plot_series.hpp"

namespace mgtrain::plot {

enum class ImageFormat { kPng, kSvg };

// From the file name's extension (.png, .svg); throws UsageError for anything else.
ImageFormat format_of(const std::string& path);

// Renders `spec` at width x height (pixels for PNG, points for SVG) into `path`, through a temporary file in the
// same directory renamed at the end, so a failure leaves no half-written image. Throws Error naming the path and
// cairo's reason.
void render_plot_file(const PlotSpec& spec, const std::string& path, int width, int height);

}  // namespace mgtrain::plot
