// The straggler detector on ranks in lock-step (DDP, docs/diagnosis.md): every step ends for all ranks when
// the slowest one's work is done, so step rates are equal; the ranks' busy seconds (time outside the wait, from the
// progress line's "wait") name the slow one. Synthetic series: a rank with 30 % more own work is flagged, equal noisy
// ranks are not, a rank that does not report its wait falls back to step rates; the progress line's "wait" and
// run.json's busy fields.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "contract/heartbeat_line.hpp"
#include "observe/run_record.hpp"
#include "observe/straggler_detector.hpp"

using namespace mgtrain;

namespace {

using Clock = StragglerDetector::Clock;

Clock::time_point at(double seconds) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

// One report of a rank: the step done, when (the end of that step's all-reduce) and its busy seconds so far.
struct Report {
  double time;
  std::int64_t step;
  double busy;
};

// Ranks in lock-step from t = 2 s: each step, rank r works work[r] x U(1 - spread, 1 + spread) seconds, then waits in
// the all-reduce until the slowest is done, plus `comm` seconds of transfer every rank spends waiting too.
std::vector<std::vector<Report>> lockstep(const std::vector<double>& work, double spread, double until, unsigned seed,
                                          double comm = 0.005) {
  std::mt19937 engine(seed);
  std::vector<std::vector<Report>> reports(work.size());
  std::vector<double> busy(work.size(), 0);
  double t = 2;
  for (std::int64_t step = 1; t < until; ++step) {
    double slowest = 0;
    std::vector<double> done(work.size());
    for (std::size_t r = 0; r < work.size(); ++r) {
      done[r] = work[r] * std::uniform_real_distribution<double>(1 - spread, 1 + spread)(engine);
      slowest = std::max(slowest, done[r]);
    }
    t += slowest + comm;
    for (std::size_t r = 0; r < work.size(); ++r) {
      busy[r] += done[r];
      reports[r].push_back(Report{t, step, 1000.0 * static_cast<double>(r) + busy[r]});  // any origin per rank
    }
  }
  return reports;
}

struct Event {
  double time;
  StragglerChange change;
};

// Reads every rank's latest report each `tick` seconds (as the launcher reads the files), with its busy seconds
// unless the rank is in `no_busy`; returns the flags raised and cleared.
std::vector<Event> run(StragglerDetector& detector, const std::vector<std::vector<Report>>& ranks, double to,
                       const std::vector<int>& no_busy = {}, double tick = 0.5) {
  std::vector<Event> events;
  for (double t = 0; t <= to; t += tick) {
    for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
      const auto& reports = ranks[rank];
      const auto next = std::upper_bound(reports.begin(), reports.end(), t,
                                         [](double now, const Report& report) { return now < report.time; });
      if (next == reports.begin()) continue;
      const Report& last = *(next - 1);
      const bool busy = std::find(no_busy.begin(), no_busy.end(), static_cast<int>(rank)) == no_busy.end();
      detector.observe(static_cast<int>(rank), at(last.time), last.step,
                       busy ? std::optional<double>(last.busy) : std::nullopt);
    }
    for (const StragglerChange& change : detector.evaluate(at(t))) events.push_back(Event{t, change});
  }
  return events;
}

}  // namespace

TEST_CASE("lock-step: a rank with 30 % more own work is flagged by its busy time, not its step rate",
          "[straggler][lockstep]") {
  StragglerDetector detector(StragglerSettings{});
  const auto ranks = lockstep({0.1, 0.1, 0.13, 0.1}, 0.1, 400, 11);
  const std::vector<Event> events = run(detector, ranks, 300);
  REQUIRE(events.size() == 1);
  const StragglerChange& flag = events.front().change;
  CHECK(flag.rank == 2);
  CHECK(flag.flagged());
  CHECK(flag.basis == StragglerBasis::kBusyTime);
  CHECK(events.front().time <= 2 + 60);
  CHECK(flag.busy_per_step == Approx(0.13).epsilon(0.05));
  CHECK(flag.median_busy_per_step == Approx(0.1).epsilon(0.05));
  CHECK(flag.step_rate == Approx(flag.median_step_rate).epsilon(0.02));  // lock-step: the rates cannot tell
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    CHECK(detector.flagged(rank) == (rank == 2));
    REQUIRE(detector.busy_per_step(rank));
  }
  REQUIRE(detector.episodes().size() == 1);
  CHECK(detector.episodes()[0].basis == StragglerBasis::kBusyTime);
  CHECK(detector.episodes()[0].highest_busy_per_step >= detector.episodes()[0].busy_per_step);
  CHECK_THAT(straggler_message(flag),
             Catch::Matches(R"(rank 2 is a straggler: 0\.1[2-4]\d? s of own work per step against a median of )"
                            R"(0\.(09\d\d|1\d{0,2}) s \((2[5-9]|3[0-5]) % more; steps/s equal in lock-step: )"
                            R"(\d\.\d\d against \d\.\d\d\) over the last 30 s)"));
}

TEST_CASE("lock-step: equal ranks with noisy work are not flagged over ten minutes", "[straggler][lockstep]") {
  for (unsigned seed : {1u, 2u, 3u}) {
    for (std::size_t count : {2u, 3u, 8u}) {
      CAPTURE(seed, count);
      StragglerDetector detector(StragglerSettings{});
      CHECK(run(detector, lockstep(std::vector<double>(count, 0.1), 0.3, 700, seed), 600).empty());
      CHECK(detector.busy_per_step(0));
    }
  }
}

TEST_CASE("lock-step: without every rank's busy time the step rates decide, and cannot tell", "[straggler][lockstep]") {
  const auto ranks = lockstep({0.1, 0.1, 0.13, 0.1}, 0.1, 400, 11);
  SECTION("no rank reports its wait (the limit of step rates)") {
    StragglerDetector detector(StragglerSettings{});
    CHECK(run(detector, ranks, 300, {0, 1, 2, 3}).empty());
    CHECK_FALSE(detector.busy_per_step(2));
  }
  SECTION("one rank does not report its wait: step rates for all") {
    StragglerDetector detector(StragglerSettings{});
    CHECK(run(detector, ranks, 300, {0}).empty());
  }
}

TEST_CASE("lock-step: the flag clears when the rank's own work is back near the median", "[straggler][lockstep]") {
  StragglerDetector detector(StragglerSettings{0.2, 10.0});
  auto slow = lockstep({0.1, 0.14, 0.1}, 0.05, 60, 5);
  auto equal = lockstep({0.1, 0.1, 0.1}, 0.05, 200, 6);
  // From 60 s on, rank 1 works as fast as the others (the same origins, continued).
  for (std::size_t r = 0; r < 3; ++r) {
    const Report last = slow[r].back();
    for (const Report& report : equal[r]) {
      if (report.time + last.time - 2 > 150) break;
      slow[r].push_back(Report{report.time + last.time - 2, report.step + last.step,
                               last.busy + report.busy - 1000.0 * static_cast<double>(r)});
    }
  }
  const std::vector<Event> events = run(detector, slow, 140);
  REQUIRE(events.size() == 2);
  CHECK(events[0].change.flagged());
  CHECK(events[0].change.rank == 1);
  CHECK(events[1].change.kind == StragglerChange::Kind::kRecovered);
  CHECK(events[1].time > 60);
  CHECK_THAT(straggler_message(events[1].change),
             Catch::Contains("rank 1 is no longer a straggler: 0.1") && Catch::Contains("s of own work per step"));
  CHECK_FALSE(detector.flagged(1));
}

TEST_CASE("progress lines: the wait gives the busy seconds", "[straggler][lockstep]") {
  const std::optional<ProgressReport> report = parse_progress("{\"step\":12,\"time\":1763800010.5,\"wait\":2.25}");
  REQUIRE(report);
  CHECK(report->step == 12);
  REQUIRE(report->busy);
  CHECK(*report->busy == Approx(1763800008.25));
  CHECK_FALSE(parse_progress("{\"step\":12,\"loss\":0.5,\"time\":1763800000.5}")->busy);
  CHECK_FALSE(parse_progress("42")->busy);
  CHECK_FALSE(parse_progress("{\"step\":1,\"time\":5,\"wait\":-1}")->busy);     // nonsense: ignored
  CHECK_FALSE(parse_progress("{\"step\":1,\"time\":5,\"wait\":\"2\"}")->busy);  // not a number
  CHECK_FALSE(parse_progress(""));
  HeartbeatInfo info{7, 0.5, 1763800000.25, 3.5};
  const std::optional<HeartbeatInfo> round = parse_heartbeat_line(format_heartbeat_line(info));
  REQUIRE(round);
  CHECK(round->wait == 3.5);
  CHECK(format_heartbeat_line(HeartbeatInfo{7, 0.5, 1.0}).find("wait") == std::string::npos);
}

TEST_CASE("run.json: an episode compared by busy time keeps its busy seconds", "[straggler][lockstep]") {
  RunRecord record;
  record.run_id = "r";
  StragglerRecord busy{1, 0, 1763800000.25, std::nullopt, 7.3, 7.3, 7.2};
  busy.busy_per_step = 0.1321;
  busy.median_busy_per_step = 0.1034;
  busy.highest_busy_per_step = 0.14;
  record.stragglers = {busy, StragglerRecord{2, 0, 1763800100.0, std::nullopt, 3.5, 5.0, 3.5}};
  const std::string text = run_record_to_json(record);
  const RunRecord back = parse_run_record(text, "run.json");
  REQUIRE(back.stragglers.size() == 2);
  REQUIRE(back.stragglers[0].busy_per_step);
  CHECK(*back.stragglers[0].busy_per_step == Approx(0.1321));
  CHECK(back.stragglers[0].median_busy_per_step == Approx(0.1034));
  CHECK(back.stragglers[0].highest_busy_per_step == Approx(0.14));
  CHECK_FALSE(back.stragglers[1].busy_per_step);  // compared by step rates: no busy fields
}
