// torchrun's --tee / --redirect values and --local-ranks-filter, resolved per local rank.
#include <catch2/catch.hpp>

#include "util/error.hpp"
#include "output/output_routing.hpp"

using namespace mgtrain;

TEST_CASE("a single stream value applies to every rank", "[routing]") {
  auto all = parse_stream_selection("3", 2, "launch.tee");
  REQUIRE(all.size() == 2);
  CHECK(all[1].out);
  CHECK(all[1].err);
  auto err_only = parse_stream_selection(" 2 ", 1, "launch.tee");
  CHECK_FALSE(err_only[0].out);
  CHECK(err_only[0].err);
  auto none = parse_stream_selection("0", 3, "launch.tee");
  CHECK_FALSE(none[2].out);
  CHECK_FALSE(none[2].err);
}

TEST_CASE("a per-rank mapping names ranks, others get nothing, ranks beyond nproc are ignored", "[routing]") {
  auto mapped = parse_stream_selection("0:1,1:3", 3, "launch.redirect");
  CHECK(mapped[0].out);
  CHECK_FALSE(mapped[0].err);
  CHECK(mapped[1].out);
  CHECK(mapped[1].err);
  CHECK_FALSE(mapped[2].out);
  CHECK_FALSE(mapped[2].err);
  auto beyond = parse_stream_selection("9:1", 2, "launch.tee");  // torchrun's workaround value
  CHECK_FALSE(beyond[0].out);
  CHECK_FALSE(beyond[1].out);
}

TEST_CASE("bad stream selections name the setting and the accepted forms", "[routing]") {
  CHECK_THROWS_WITH(parse_stream_selection("4", 2, "launch.tee"), Catch::Contains("launch.tee") && Catch::Contains("0:1,1:3"));
  CHECK_THROWS_AS(parse_stream_selection("out", 2, "launch.tee"), UsageError);
  CHECK_THROWS_WITH(parse_stream_selection("0:1,x:2", 2, "launch.redirect"), Catch::Contains("'x:2'"));
  CHECK_THROWS_AS(parse_stream_selection("0:", 2, "launch.redirect"), UsageError);
}

TEST_CASE("local ranks filter", "[routing]") {
  CHECK(parse_local_ranks_filter("", 3) == std::vector<bool>{true, true, true});
  CHECK(parse_local_ranks_filter("0", 3) == std::vector<bool>{true, false, false});
  CHECK(parse_local_ranks_filter("0, 2", 3) == std::vector<bool>{true, false, true});
  CHECK_THROWS_WITH(parse_local_ranks_filter("3", 3), Catch::Contains("local rank 3 does not exist"));
  CHECK_THROWS_WITH(parse_local_ranks_filter("a", 3), Catch::Contains("launch.local_ranks_filter"));
}

TEST_CASE("console routing follows torchrun: redirect hides, tee shows again, the filter silences ranks", "[routing]") {
  auto plain = resolve_console_routing("0", "0", "", 2);
  CHECK(plain[0].stdout_to_console);
  CHECK(plain[0].stderr_to_console);

  auto redirected = resolve_console_routing("0", "3", "", 2);
  CHECK_FALSE(redirected[1].stdout_to_console);
  CHECK_FALSE(redirected[1].stderr_to_console);

  auto stdout_off = resolve_console_routing("0", "1", "", 1);
  CHECK_FALSE(stdout_off[0].stdout_to_console);
  CHECK(stdout_off[0].stderr_to_console);

  auto teed_back = resolve_console_routing("1", "3", "", 1);
  CHECK(teed_back[0].stdout_to_console);
  CHECK_FALSE(teed_back[0].stderr_to_console);

  auto filtered = resolve_console_routing("0", "0", "1", 2);
  CHECK_FALSE(filtered[0].stdout_to_console);
  CHECK_FALSE(filtered[0].stderr_to_console);
  CHECK(filtered[1].stdout_to_console);
}

TEST_CASE("launch.tty: auto, on, off or a local rank, anything else names the key", "[routing][tty]") {
  CHECK(parse_tty_choice("auto", 2).mode == TtyMode::Auto);
  CHECK(parse_tty_choice(" off ", 2).mode == TtyMode::Off);
  TtyChoice on = parse_tty_choice("on", 2);
  CHECK((on.mode == TtyMode::On && on.local_rank == 0));
  TtyChoice one = parse_tty_choice("1", 2);
  CHECK((one.mode == TtyMode::On && one.local_rank == 1));
  CHECK_THROWS_WITH(parse_tty_choice("2", 2), Catch::Contains("launch.tty: local rank 2 does not exist") &&
                                                 Catch::Contains("local ranks 0..1"));
  CHECK_THROWS_WITH(parse_tty_choice("yes", 2), Catch::Contains("launch.tty: 'yes' is not a choice"));
  CHECK_THROWS_AS(parse_tty_choice("-1", 2), UsageError);
}

TEST_CASE("launch.tty decides per stream, auto follows the console, on and N force both streams", "[routing][tty]") {
  const ConsoleRouting both{true, true};
  const ConsoleRouting stdout_redirected{false, true};
  auto streams = [](const TtyChoice& choice, int rank, const ConsoleRouting& routing, bool out_tty, bool err_tty) {
    StreamSet set = terminal_streams(choice, rank, routing, out_tty, err_tty);
    return std::make_pair(set.out, set.err);
  };
  const TtyChoice automatic{TtyMode::Auto, 0};
  CHECK(streams(automatic, 0, both, true, true) == std::make_pair(true, true));
  CHECK(streams(automatic, 1, both, true, true) == std::make_pair(false, false));    // only local rank 0
  CHECK(streams(automatic, 0, both, false, true) == std::make_pair(false, true));    // `> file`: stdout is no terminal
  CHECK(streams(automatic, 0, stdout_redirected, true, true) == std::make_pair(false, true));  // --redirect 1
  CHECK(streams(automatic, 0, both, false, false) == std::make_pair(false, false));  // CI: pipes
  CHECK(streams(TtyChoice{TtyMode::On, 0}, 0, stdout_redirected, false, false) == std::make_pair(true, true));
  CHECK(streams(TtyChoice{TtyMode::On, 1}, 0, both, true, true) == std::make_pair(false, false));
  CHECK(streams(TtyChoice{TtyMode::On, 1}, 1, both, false, false) == std::make_pair(true, true));
  CHECK(streams(TtyChoice{TtyMode::Off, 0}, 0, both, true, true) == std::make_pair(false, false));
}
