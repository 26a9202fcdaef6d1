// The hand-over text from `mgtrain plot` to `mgtrain-plot`: round trip, exact numbers, and refusals naming the line.
#include <catch2/catch.hpp>

#include "observe/plot_series.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;

TEST_CASE("plot series: the text round-trips names, labels and exact values", "[plot]") {
  PlotSpec spec;
  spec.title = "loss: a, b";
  spec.x_label = "step";
  spec.y_label = "loss";
  spec.series = {{"run a", {{1, 0.1}, {2, 1.0 / 3.0}, {1e9, -2.5e-7}}}, {"b\nwith newline", {}}};
  const PlotSpec back = parse_plot_spec(plot_spec_to_text(spec));
  CHECK(back.title == spec.title);
  CHECK(back.x_label == "step");
  CHECK(back.y_label == "loss");
  REQUIRE(back.series.size() == 2);
  CHECK(back.series[0].name == "run a");
  CHECK(back.series[0].points == spec.series[0].points);  // %.17g: bit-exact
  CHECK(back.series[1].name == "b with newline");
  CHECK(back.series[1].points.empty());
}

TEST_CASE("plot series: damaged text is refused with its line", "[plot]") {
  CHECK_THROWS_WITH(parse_plot_spec(""), Contains("empty"));
  CHECK_THROWS_WITH(parse_plot_spec("hello\n"), Contains("line 1") && Contains("expected 'mgtrain-plot 1'"));
  CHECK_THROWS_WITH(parse_plot_spec("mgtrain-plot 1\n1 2\nend\n"),
                    Contains("line 2") && Contains("before any 'series'"));
  CHECK_THROWS_WITH(parse_plot_spec("mgtrain-plot 1\nseries a\n1 x\nend\n"),
                    Contains("line 3") && Contains("is not 'x y'"));
  CHECK_THROWS_WITH(parse_plot_spec("mgtrain-plot 1\nseries a\n1 nan\nend\n"), Contains("not finite"));
  CHECK_THROWS_WITH(parse_plot_spec("mgtrain-plot 1\nseries a\n1 2\n"), Contains("without 'end'"));
}
