// torchrun's console routing rule per local rank (tee, redirect, the rank filter) and the pseudo-terminal choice.
// Parsing the settings' text is tests/config/test_launch_settings.cpp; resolving them per rank, test_launch_plan.cpp.
#include <catch2/catch.hpp>

#include "output/output_routing.hpp"

using namespace mgtrain;

namespace {
// One StreamSet per local rank from torchrun Std modes (0-3).
std::vector<StreamSet> modes(std::initializer_list<int> per_rank) {
  std::vector<StreamSet> sets;
  for (int mode : per_rank) sets.push_back(streams_of_std(mode));
  return sets;
}
}  // namespace

TEST_CASE("torchrun's Std modes are stream sets: 0 none, 1 stdout, 2 stderr, 3 both", "[routing]") {
  for (int mode = 0; mode <= 3; ++mode) {
    INFO("mode " << mode);
    CHECK(streams_of_std(mode).out == (mode == 1 || mode == 3));
    CHECK(streams_of_std(mode).err == (mode == 2 || mode == 3));
  }
}

TEST_CASE("console routing follows torchrun: redirect hides, tee shows again, the filter silences ranks", "[routing]") {
  auto plain = resolve_console_routing(modes({0, 0}), modes({0, 0}), {true, true});
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].stdout_to_console);
  CHECK(plain[0].stderr_to_console);

  auto redirected = resolve_console_routing(modes({0, 0}), modes({3, 3}), {true, true});
  CHECK_FALSE(redirected[1].stdout_to_console);
  CHECK_FALSE(redirected[1].stderr_to_console);

  auto stdout_off = resolve_console_routing(modes({0}), modes({1}), {true});
  CHECK_FALSE(stdout_off[0].stdout_to_console);
  CHECK(stdout_off[0].stderr_to_console);

  auto teed_back = resolve_console_routing(modes({1}), modes({3}), {true});
  CHECK(teed_back[0].stdout_to_console);
  CHECK_FALSE(teed_back[0].stderr_to_console);

  auto filtered = resolve_console_routing(modes({0, 0}), modes({0, 0}), {false, true});
  CHECK_FALSE(filtered[0].stdout_to_console);
  CHECK_FALSE(filtered[0].stderr_to_console);
  CHECK(filtered[1].stdout_to_console);

  auto per_rank = resolve_console_routing(modes({0, 0}), modes({1, 3}), {true, true});  // redirect 0:1,1:3
  CHECK((!per_rank[0].stdout_to_console && per_rank[0].stderr_to_console));
  CHECK((!per_rank[1].stdout_to_console && !per_rank[1].stderr_to_console));
}

TEST_CASE("a stream is teed when --tee names it and the rank filter shows the rank", "[routing]") {
  auto plain = resolve_console_routing(modes({0}), modes({0}), {true});
  CHECK_FALSE(plain[0].stdout_teed);
  CHECK_FALSE(plain[0].stderr_teed);
  auto tee_out = resolve_console_routing(modes({1, 3}), modes({0, 3}), {true, false});
  CHECK(tee_out[0].stdout_teed);  // --tee 1 without --redirects: teed (torchrun adds the redirect)
  CHECK_FALSE(tee_out[0].stderr_teed);
  CHECK_FALSE(tee_out[1].stdout_teed);  // filtered out: written to its files only
  CHECK_FALSE(tee_out[1].stderr_teed);
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
  CHECK(streams(automatic, 1, both, true, true) == std::make_pair(false, false));  // only local rank 0
  CHECK(streams(automatic, 0, both, false, true) == std::make_pair(false, true));  // `> file`: stdout is no terminal
  CHECK(streams(automatic, 0, stdout_redirected, true, true) == std::make_pair(false, true));  // --redirect 1
  CHECK(streams(automatic, 0, both, false, false) == std::make_pair(false, false));            // CI: pipes
  CHECK(streams(TtyChoice{TtyMode::On, 0}, 0, stdout_redirected, false, false) == std::make_pair(true, true));
  CHECK(streams(TtyChoice{TtyMode::On, 1}, 0, both, true, true) == std::make_pair(false, false));
  CHECK(streams(TtyChoice{TtyMode::On, 1}, 1, both, false, false) == std::make_pair(true, true));
  CHECK(streams(TtyChoice{TtyMode::Off, 0}, 0, both, true, true) == std::make_pair(false, false));
}
