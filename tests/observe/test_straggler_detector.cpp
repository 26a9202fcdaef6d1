// The straggler detector on synthetic time series (steady ranks, a rank 30 % slower, noisy equal ranks that
// must not be flagged, a rank that recovers, stalls, restarts, warm-up, too few ranks), its messages, and
// the progress file's step (heartbeat line or decimal count).
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>

#include "contract/heartbeat_line.hpp"
#include "observe/straggler_detector.hpp"
#include "util/error.hpp"

using namespace mgtrain;

namespace {

using Clock = StragglerDetector::Clock;

Clock::time_point at(double seconds) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

// When each step of one rank ends: the first after `first_step` seconds (start-up and warm-up), the next ones
// after duration(t) seconds each, t being the time that step starts.
std::vector<double> step_ends(double until, std::function<double(double)> duration, double first_step = 5) {
  std::vector<double> ends;
  for (double t = first_step; t <= until; t += duration(t)) ends.push_back(t);
  return ends;
}

std::function<double(double)> every(double seconds) {
  return [seconds](double) { return seconds; };
}

// Step times drawn uniformly from mean x [1 - spread, 1 + spread] (independent per rank).
std::function<double(double)> noisy(double mean, double spread, unsigned seed) {
  auto engine = std::make_shared<std::mt19937>(seed);
  return
      [=](double) { return std::uniform_real_distribution<double>(mean * (1 - spread), mean * (1 + spread))(*engine); };
}

struct Event {
  double time;
  StragglerChange change;
};

// Reads every rank's step count each `tick` seconds from `from` to `to` (as the launcher does with the files),
// evaluating after each round; returns the flags raised and cleared with their times.
std::vector<Event> run(StragglerDetector& detector, const std::vector<std::vector<double>>& ranks, double from,
                       double to, double tick = 0.5) {
  std::vector<Event> events;
  for (double t = from; t <= to; t += tick) {
    for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
      const auto& ends = ranks[rank];
      const auto done = std::upper_bound(ends.begin(), ends.end(), t) - ends.begin();
      detector.observe(static_cast<int>(rank), at(t), done);
    }
    for (const StragglerChange& change : detector.evaluate(at(t))) events.push_back(Event{t, change});
  }
  return events;
}

int raised(const std::vector<Event>& events) {
  return static_cast<int>(
      std::count_if(events.begin(), events.end(), [](const Event& e) { return e.change.flagged(); }));
}

}  // namespace

TEST_CASE("straggler: equal steady ranks are never flagged and their rates are measured", "[straggler]") {
  StragglerDetector detector(StragglerSettings{});
  const std::vector<std::vector<double>> ranks(4, step_ends(700, every(1.0)));
  CHECK(run(detector, ranks, 0, 600).empty());
  for (int rank = 0; rank < 4; ++rank) {
    REQUIRE(detector.step_rate(rank));
    CHECK(*detector.step_rate(rank) == Approx(1.0).epsilon(0.05));
    CHECK_FALSE(detector.flagged(rank));
  }
  CHECK(detector.episodes().empty());
}

TEST_CASE("straggler: a rank 30 % slower is flagged within 60 s, once, and only it", "[straggler]") {
  StragglerDetector detector(StragglerSettings{});
  std::vector<std::vector<double>> ranks(4, step_ends(400, every(1.0)));
  ranks[2] = step_ends(400, every(1.0 / 0.7));
  const std::vector<Event> events = run(detector, ranks, 0, 300);
  REQUIRE(events.size() == 1);
  const Event& flag = events.front();
  CHECK(flag.change.rank == 2);
  CHECK(flag.change.flagged());
  CHECK(flag.time <= 5 + 60);  // its first step ends at 5 s
  CHECK(flag.change.step_rate == Approx(0.7).epsilon(0.05));
  CHECK(flag.change.median_step_rate == Approx(1.0).epsilon(0.05));
  CHECK(detector.flagged(2));
  CHECK_FALSE(detector.flagged(0));
  REQUIRE(detector.episodes().size() == 1);
  CHECK(detector.episodes()[0].rank == 2);
  CHECK_FALSE(detector.episodes()[0].end);
  const std::string message = straggler_message(flag.change);
  CHECK_THAT(message, Catch::Matches(R"(rank 2 is a straggler: 0\.[67]\d steps/s against a median of (1\.0\d|0\.99) )"
                                     R"(\((2[89]|3[012]) % slower\) over the last 30 s)"));
}

TEST_CASE("straggler: with two ranks the slower one is judged against the other", "[straggler]") {
  StragglerDetector detector(StragglerSettings{});
  const std::vector<std::vector<double>> ranks{step_ends(200, every(0.1)), step_ends(200, every(0.1 / 0.7))};
  const std::vector<Event> events = run(detector, ranks, 0, 120);
  REQUIRE(raised(events) == 1);
  CHECK(events.front().change.rank == 1);
  CHECK_FALSE(detector.flagged(0));
}

TEST_CASE("straggler: a rank only 10 % slower stays below a 20 % margin", "[straggler]") {
  StragglerDetector detector(StragglerSettings{});
  std::vector<std::vector<double>> ranks(3, step_ends(700, every(0.5)));
  ranks[1] = step_ends(700, every(0.5 / 0.9));
  CHECK(run(detector, ranks, 0, 600).empty());
  CHECK(*detector.step_rate(1) == Approx(1.8).epsilon(0.05));
}

TEST_CASE("straggler: noisy but equal ranks are not flagged over ten minutes", "[straggler]") {
  for (unsigned seed : {1u, 2u, 3u, 4u, 5u}) {
    CAPTURE(seed);
    for (int count : {2, 4, 8}) {
      CAPTURE(count);
      StragglerDetector detector(StragglerSettings{});
      std::vector<std::vector<double>> ranks;
      for (int rank = 0; rank < count; ++rank)
        ranks.push_back(step_ends(700, noisy(1.0, 0.5, seed * 100 + static_cast<unsigned>(rank))));
      CHECK(run(detector, ranks, 0, 600).empty());
    }
  }
}

TEST_CASE("straggler: noisy ranks with one 30 % slower still find it", "[straggler]") {
  StragglerDetector detector(StragglerSettings{});
  std::vector<std::vector<double>> ranks;
  for (unsigned rank = 0; rank < 4; ++rank) ranks.push_back(step_ends(400, noisy(0.5, 0.4, 7 + rank)));
  ranks[3] = step_ends(400, noisy(0.5 / 0.7, 0.4, 99));
  const std::vector<Event> events = run(detector, ranks, 0, 300);
  REQUIRE(raised(events) == 1);
  CHECK(events.front().change.rank == 3);
  CHECK(events.front().time <= 65);
}

TEST_CASE("straggler: a rank that slows down mid-run, then recovers, is flagged and cleared once", "[straggler]") {
  StragglerDetector detector(StragglerSettings{});
  std::vector<std::vector<double>> ranks(3, step_ends(700, every(1.0)));
  ranks[0] = step_ends(700, [](double t) { return t >= 100 && t < 250 ? 1.0 / 0.6 : 1.0; });
  const std::vector<Event> events = run(detector, ranks, 0, 600);
  REQUIRE(events.size() == 2);
  CHECK(events[0].change.flagged());
  CHECK(events[0].change.rank == 0);
  CHECK(events[0].time > 100);
  CHECK(events[0].time <= 100 + 60);
  CHECK(events[1].change.kind == StragglerChange::Kind::kRecovered);
  CHECK(events[1].time > 250);
  CHECK(events[1].time <= 250 + 60);
  CHECK(events[1].change.step_rate == Approx(1.0).epsilon(0.15));
  CHECK_THAT(straggler_message(events[1].change), Catch::StartsWith("rank 0 is no longer a straggler: "));
  REQUIRE(detector.episodes().size() == 1);
  const StragglerEpisode& episode = detector.episodes()[0];
  REQUIRE(episode.end);
  CHECK(episode.lowest_step_rate <= episode.step_rate);
  CHECK(episode.lowest_step_rate == Approx(0.6).epsilon(0.1));
}

TEST_CASE("straggler: a rate hovering at the threshold does not flap", "[straggler]") {
  // Rank 1 alternates 15 s at 0.75 and 15 s at 0.85 of the others' speed: at most one episode.
  StragglerDetector detector(StragglerSettings{});
  std::vector<std::vector<double>> ranks(3, step_ends(1300, every(0.2)));
  ranks[1] = step_ends(1300, [](double t) { return static_cast<long>(t / 15) % 2 ? 0.2 / 0.85 : 0.2 / 0.75; });
  CHECK(raised(run(detector, ranks, 0, 1200)) <= 1);
}

TEST_CASE("straggler: a rank that stops advancing is flagged as its rate falls", "[straggler]") {
  StragglerDetector detector(StragglerSettings{});
  std::vector<std::vector<double>> ranks(3, step_ends(400, every(1.0)));
  ranks[1] = step_ends(100, every(1.0));  // no step after 100 s
  const std::vector<Event> events = run(detector, ranks, 0, 300);
  REQUIRE(raised(events) == 1);
  CHECK(events.front().change.rank == 1);
  CHECK(events.front().time <= 100 + 60);
  CHECK(*detector.step_rate(1) < 0.2);
}

TEST_CASE("straggler: all ranks stopping together flags nobody", "[straggler]") {
  StragglerDetector detector(StragglerSettings{});
  const std::vector<std::vector<double>> ranks(4, step_ends(100, every(1.0)));  // a collective that never ends
  CHECK(run(detector, ranks, 0, 400).empty());
}

TEST_CASE("straggler: warm-up and ranks without progress are not judged", "[straggler]") {
  StragglerDetector detector(StragglerSettings{});
  std::vector<std::vector<double>> ranks(3, step_ends(400, every(1.0)));
  ranks[0] = step_ends(400, every(1.0), 60);  // a minute of compilation before its first step
  ranks[2] = {};                              // never reports a step
  const std::vector<Event> events = run(detector, ranks, 0, 300);
  CHECK(events.empty());
  CHECK_FALSE(detector.step_rate(2));
  CHECK(detector.step_rate(0));

  SECTION("a single rank with progress has no one to be compared with") {
    StragglerDetector alone(StragglerSettings{});
    const std::vector<std::vector<double>> one{step_ends(400, every(2.0)), {}};
    CHECK(run(alone, one, 0, 300).empty());
    CHECK(alone.step_rate(0));
  }
  SECTION("no rate before half a window of measurement") {
    StragglerDetector fresh(StragglerSettings{});
    const std::vector<std::vector<double>> two(2, step_ends(400, every(1.0)));
    run(fresh, two, 0, 5 + 1 + 14);  // measured from the second advance at 6 s: 14 s < 15 s
    CHECK_FALSE(fresh.step_rate(0));
    run(fresh, two, 20, 22);
    CHECK(fresh.step_rate(0));
  }
}

TEST_CASE("straggler: restarts start the ranks over and end open episodes", "[straggler]") {
  StragglerDetector detector(StragglerSettings{});
  std::vector<std::vector<double>> ranks(3, step_ends(200, every(1.0)));
  ranks[2] = step_ends(200, every(2.0));
  REQUIRE(raised(run(detector, ranks, 0, 100)) == 1);
  REQUIRE(detector.flagged(2));

  SECTION("the rank's step count goes back (its worker was restarted)") {
    detector.observe(2, at(100.5), 0);
    std::vector<StragglerChange> changes = detector.evaluate(at(100.5));
    REQUIRE(changes.size() == 1);
    CHECK(changes[0].kind == StragglerChange::Kind::kLeft);
    CHECK_THAT(straggler_message(changes[0]),
               Catch::StartsWith("rank 2 is no longer judged as a straggler: it exited or started over"));
    CHECK_FALSE(detector.flagged(2));
    CHECK_FALSE(detector.step_rate(2));  // warm-up again
    REQUIRE(detector.episodes()[0].end);
  }
  SECTION("a new attempt of the whole group") {
    detector.restart(at(101));
    CHECK(detector.evaluate(at(101)).size() == 1);
    CHECK_FALSE(detector.step_rate(0));
    // The new attempt: equal ranks, nothing flagged, no leftover episode reopened.
    const std::vector<std::vector<double>> equal(3, step_ends(400, every(1.0), 110));
    CHECK(run(detector, equal, 102, 300).empty());
    CHECK(detector.episodes().size() == 1);
  }
  SECTION("the rank went away") {
    detector.forget(2, at(101));
    const std::vector<StragglerChange> changes = detector.evaluate(at(101));
    REQUIRE(changes.size() == 1);
    CHECK(changes[0].kind == StragglerChange::Kind::kLeft);
    CHECK_FALSE(detector.flagged(2));
  }
  SECTION("the other ranks finished first") {
    detector.forget(0, at(101));
    detector.forget(1, at(101));
    const std::vector<StragglerChange> changes = detector.evaluate(at(101));
    REQUIRE(changes.size() == 1);
    CHECK(changes[0].kind == StragglerChange::Kind::kAlone);
    CHECK(changes[0].rank == 2);
    CHECK_THAT(straggler_message(changes[0]), Catch::Contains("no other rank reports progress"));
    CHECK(detector.step_rate(2));  // still measured, just not judged
  }
}

TEST_CASE("straggler: short windows for tests and tight loops", "[straggler]") {
  StragglerDetector detector(StragglerSettings{0.2, 4.0});
  std::vector<std::vector<double>> ranks(3, step_ends(60, every(0.05), 0.5));
  ranks[1] = step_ends(60, every(0.05 / 0.7), 0.5);
  const std::vector<Event> events = run(detector, ranks, 0, 30, 0.2);
  REQUIRE(raised(events) == 1);
  CHECK(events.front().change.rank == 1);
  CHECK(events.front().time <= 10);
}

TEST_CASE("straggler: settings are checked", "[straggler]") {
  CHECK_THROWS_AS(StragglerDetector(StragglerSettings{0, 30}), UsageError);
  CHECK_THROWS_AS(StragglerDetector(StragglerSettings{1, 30}), UsageError);
  CHECK_THROWS_WITH(StragglerDetector(StragglerSettings{0.2, 0}), Catch::Contains("launch.straggler_window"));
}

TEST_CASE("progress files: heartbeat lines and decimal step counts", "[straggler]") {
  CHECK(parse_progress_step("{\"step\":12,\"loss\":0.5,\"time\":1763800000.5}") == 12);
  CHECK(parse_progress_step("{\"step\":3,\"loss\":null,\"time\":1}          \n") == 3);
  CHECK(parse_progress_step("42") == 42);
  CHECK(parse_progress_step(" 42\n") == 42);
  CHECK_FALSE(parse_progress_step(""));  // touched only
  CHECK_FALSE(parse_progress_step("\n"));
  CHECK_FALSE(parse_progress_step("-3"));
  CHECK_FALSE(parse_progress_step("4 2"));
  CHECK_FALSE(parse_progress_step("step 4"));
  CHECK_FALSE(parse_progress_step("99999999999999999999999"));
}
