// Cairo drawing of a line plot (see plot_renderer.hpp). PNG through an image surface, SVG through an SVG surface.
#include "plot_renderer.hpp"

#include <cairo-svg.h>
#include <cairo.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "axis_ticks.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mgtrain::plot {
namespace {

struct Rgb {
  double r, g, b;
};

// matplotlib's tab10, the colours people know from training curves.
constexpr Rgb kPalette[] = {{0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
                            {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
                            {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}};

double text_width(cairo_t* cr, const std::string& text) {
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text.c_str(), &extents);
  return extents.x_advance;
}

void show_text_at(cairo_t* cr, const std::string& text, double x, double y, double align_x, double align_y) {
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text.c_str(), &extents);
  cairo_move_to(cr, x - extents.x_advance * align_x, y + extents.height * align_y);
  cairo_show_text(cr, text.c_str());
}

const Rgb& colour_of(std::size_t series_index) {
  return kPalette[series_index % (sizeof kPalette / sizeof kPalette[0])];
}

// Where the plot area is and how data maps into it.
struct PlotArea {
  AxisTicks x_ticks, y_ticks;
  double left = 0, top = 0, width = 0, height = 0;

  double px(double x) const { return left + (x - x_ticks.low) / (x_ticks.high - x_ticks.low) * width; }
  double py(double y) const { return top + height - (y - y_ticks.low) / (y_ticks.high - y_ticks.low) * height; }
};

// The axes' ticks from the data's ranges, and the plot area inside the image (room for the y tick labels).
PlotArea layout_plot_area(cairo_t* cr, const PlotSpec& spec, double width, double height) {
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min, y_min = x_min, y_max = -x_min;
  for (const PlotSeries& series : spec.series) {
    for (const auto& [x, y] : series.points) {
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
  }
  PlotArea area;
  area.x_ticks = nice_ticks(x_min, x_max, 8);
  area.y_ticks = nice_ticks(y_min, y_max, 6);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 12);
  double y_label_width = 0;
  for (double v : area.y_ticks.values)
    y_label_width = std::max(y_label_width, text_width(cr, tick_label(v, area.y_ticks.step)));
  const double right = 24, bottom = 58;
  area.left = 40 + y_label_width + 10;
  area.top = 48;
  area.width = std::max(10.0, width - area.left - right);
  area.height = std::max(10.0, height - area.top - bottom);
  return area;
}

// Background, grid, ticks and their labels, the frame.
void draw_axes(cairo_t* cr, const PlotArea& a) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_set_line_width(cr, 1);
  for (double v : a.x_ticks.values) {
    const double x = std::round(a.px(v)) + 0.5;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, x, a.top);
    cairo_line_to(cr, x, a.top + a.height);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_move_to(cr, x, a.top + a.height);
    cairo_line_to(cr, x, a.top + a.height + 5);
    cairo_stroke(cr);
    show_text_at(cr, tick_label(v, a.x_ticks.step), x, a.top + a.height + 9, 0.5, 1.0);
  }
  for (double v : a.y_ticks.values) {
    const double y = std::round(a.py(v)) + 0.5;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, a.left, y);
    cairo_line_to(cr, a.left + a.width, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_move_to(cr, a.left - 5, y);
    cairo_line_to(cr, a.left, y);
    cairo_stroke(cr);
    show_text_at(cr, tick_label(v, a.y_ticks.step), a.left - 8, y, 1.0, 0.5);
  }
  cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
  cairo_rectangle(cr, a.left + 0.5, a.top + 0.5, a.width, a.height);
  cairo_stroke(cr);
}

void draw_titles(cairo_t* cr, const PlotSpec& spec, const PlotArea& a, double image_height) {
  cairo_set_font_size(cr, 13);
  show_text_at(cr, spec.x_label, a.left + a.width / 2, image_height - 14, 0.5, 0.0);
  cairo_save(cr);
  cairo_translate(cr, 18, a.top + a.height / 2);
  cairo_rotate(cr, -M_PI / 2);
  show_text_at(cr, spec.y_label, 0, 0, 0.5, 0.5);
  cairo_restore(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_font_size(cr, 15);
  show_text_at(cr, spec.title, a.left + a.width / 2, a.top - 18, 0.5, 0.0);
}

// The curves, clipped to the plot area; few points (evaluations) get a mark each.
void draw_curves(cairo_t* cr, const PlotSpec& spec, const PlotArea& a) {
  cairo_save(cr);
  cairo_rectangle(cr, a.left, a.top, a.width, a.height);
  cairo_clip(cr);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  for (std::size_t i = 0; i < spec.series.size(); ++i) {
    const PlotSeries& series = spec.series[i];
    const Rgb& colour = colour_of(i);
    cairo_set_source_rgb(cr, colour.r, colour.g, colour.b);
    cairo_set_line_width(cr, 2);
    for (std::size_t p = 0; p < series.points.size(); ++p) {
      const double x = a.px(series.points[p].first), y = a.py(series.points[p].second);
      if (p == 0)
        cairo_move_to(cr, x, y);
      else
        cairo_line_to(cr, x, y);
    }
    cairo_stroke(cr);
    if (series.points.size() <= 40) {
      for (const auto& [x, y] : series.points) {
        cairo_arc(cr, a.px(x), a.py(y), 3, 0, 2 * M_PI);
        cairo_fill(cr);
      }
    }
  }
  cairo_restore(cr);
}

// The corner of the plot area (top right first) where a box_w x box_h legend hides the fewest points and lines.
std::pair<double, double> legend_corner(const PlotSpec& spec, const PlotArea& a, double box_w, double box_h) {
  double box_x = 0, box_y = 0;
  std::size_t fewest = std::numeric_limits<std::size_t>::max();
  const double corners[4][2] = {{a.left + a.width - box_w - 10, a.top + 10},
                                {a.left + a.width - box_w - 10, a.top + a.height - box_h - 10},
                                {a.left + 10, a.top + 10},
                                {a.left + 10, a.top + a.height - box_h - 10}};
  for (const auto& corner : corners) {
    std::size_t hidden = 0;
    auto inside = [&](double cx, double cy) {
      return cx >= corner[0] - 4 && cx <= corner[0] + box_w + 4 && cy >= corner[1] - 4 && cy <= corner[1] + box_h + 4;
    };
    for (const PlotSeries& series : spec.series) {
      for (std::size_t p = 0; p < series.points.size(); ++p) {
        const double x1 = a.px(series.points[p].first), y1 = a.py(series.points[p].second);
        hidden += inside(x1, y1);
        if (p == 0) continue;
        const double x0 = a.px(series.points[p - 1].first), y0 = a.py(series.points[p - 1].second);
        for (int k = 1; k < 8; ++k)
          hidden += inside(x0 + (x1 - x0) * k / 8.0, y0 + (y1 - y0) * k / 8.0);  // the line too
      }
    }
    if (hidden < fewest) {
      fewest = hidden;
      box_x = corner[0];
      box_y = corner[1];
    }
  }
  return {box_x, box_y};
}

void draw_legend(cairo_t* cr, const PlotSpec& spec, const PlotArea& a) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 12);
  double name_width = 0;
  for (const PlotSeries& series : spec.series) name_width = std::max(name_width, text_width(cr, series.name));
  const double row = 18, box_w = name_width + 44, box_h = row * static_cast<double>(spec.series.size()) + 10;
  const auto [box_x, box_y] = legend_corner(spec, a, box_w, box_h);
  cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
  cairo_rectangle(cr, box_x, box_y, box_w, box_h);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  for (std::size_t i = 0; i < spec.series.size(); ++i) {
    const Rgb& colour = colour_of(i);
    const double y = box_y + 5 + row * (static_cast<double>(i) + 0.5);
    cairo_set_source_rgb(cr, colour.r, colour.g, colour.b);
    cairo_set_line_width(cr, 3);
    cairo_move_to(cr, box_x + 8, y);
    cairo_line_to(cr, box_x + 30, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    show_text_at(cr, spec.series[i].name, box_x + 36, y, 0.0, 0.5);
  }
}

void draw(cairo_t* cr, const PlotSpec& spec, double width, double height) {
  const PlotArea area = layout_plot_area(cr, spec, width, height);
  draw_axes(cr, area);
  draw_titles(cr, spec, area, height);
  draw_curves(cr, spec, area);
  draw_legend(cr, spec, area);
}

void check(cairo_status_t status, const std::string& what, const std::string& path) {
  if (status != CAIRO_STATUS_SUCCESS)
    throw Error(fmt::format("cannot {} {}: {} (cairo)", what, path, cairo_status_to_string(status)));
}

}  // namespace

ImageFormat format_of(const std::string& path) {
  if (ends_with(path, ".png")) return ImageFormat::kPng;
  if (ends_with(path, ".svg")) return ImageFormat::kSvg;
  throw UsageError(fmt::format("cannot tell the image format of '{}': name it .png or .svg", path));
}

void render_plot_file(const PlotSpec& spec, const std::string& path, int width, int height) {
  const ImageFormat format = format_of(path);
  const std::string temp = path + ".tmp." + std::to_string(getpid());
  cairo_surface_t* surface = format == ImageFormat::kPng ? cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height)
                                                         : cairo_svg_surface_create(temp.c_str(), width, height);
  cairo_t* cr = cairo_create(surface);
  draw(cr, spec, width, height);
  const cairo_status_t drawn = cairo_status(cr);
  cairo_destroy(cr);
  cairo_status_t written = CAIRO_STATUS_SUCCESS;
  if (format == ImageFormat::kPng) {
    if (drawn == CAIRO_STATUS_SUCCESS) written = cairo_surface_write_to_png(surface, temp.c_str());
  } else {
    cairo_surface_finish(surface);
    written = cairo_surface_status(surface);
  }
  cairo_surface_destroy(surface);
  try {
    check(drawn, "draw", path);
    check(written, "write", temp);
  } catch (...) {
    std::remove(temp.c_str());
    throw;
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temp.c_str());
    throw SystemError(fmt::format("cannot rename {} to {}", temp, path), error);
  }
}

}  // namespace mgtrain::plot
