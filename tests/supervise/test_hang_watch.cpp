// Hang detection's root-cause rule (decide_hang) with made-up times: the rank whose progress stopped first is the
// hung one, not the first one noticed; later ones wait; steps decide within the tie window; stopped processes
// are hung; ranks that never reported or still progress are left out. Also the watch's deadlines and its line.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "supervise/hang_watch.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;

namespace {

const SteadyTime t0{};

RankProgress progress(int local_rank, std::chrono::milliseconds last, std::optional<std::int64_t> step) {
  RankProgress rank;
  rank.local_rank = local_rank;
  rank.running = true;
  rank.reported = true;
  rank.last_progress = t0 + last;
  rank.last_step = step;
  return rank;
}

std::vector<int> local_ranks(const std::vector<HangRank>& ranks) {
  std::vector<int> out;
  for (const HangRank& rank : ranks) out.push_back(rank.local_rank);
  return out;
}

}  // namespace

TEST_CASE("no verdict until a rank that reported has been silent for the timeout", "[hang]") {
  std::vector<RankProgress> ranks = {progress(0, 1000ms, 5), progress(1, 2000ms, 5)};
  CHECK_FALSE(decide_hang(ranks, t0 + 10999ms, 10));
  CHECK(decide_hang(ranks, t0 + 11s, 10));
  CHECK_FALSE(decide_hang(ranks, t0 + 60s, 0));  // off
  ranks[0].running = false;                      // ended: not judged
  CHECK_FALSE(decide_hang(ranks, t0 + 11500ms, 10));
  RankProgress never;  // never reported: never judged, however long
  never.running = true;
  CHECK_FALSE(decide_hang({never}, t0 + 1000s, 10));
}

TEST_CASE("the rank that stopped first is hung, not the first one noticed, the others wait", "[hang]") {
  // Rank 2 stopped at 3 s; ranks 0 and 1 went on until 4.5 s and 5 s, then waited for it (in a collective).
  std::vector<RankProgress> ranks = {progress(0, 4500ms, 43), progress(1, 5000ms, 43), progress(2, 3000ms, 42),
                                     progress(3, 14900ms, 120)};  // rank 3 goes on: left out
  std::optional<HangVerdict> verdict = decide_hang(ranks, t0 + 13s, 10);
  REQUIRE(verdict);
  CHECK(local_ranks(verdict->hung) == std::vector<int>{2});
  CHECK(local_ranks(verdict->waiting) == std::vector<int>{0, 1});
  CHECK(verdict->tied.empty());
  CHECK(verdict->hung[0].silent_s == Approx(10));
  CHECK(verdict->hung[0].last_step == 42);
  CHECK(verdict->waiting[0].silent_s == Approx(8.5));
}

TEST_CASE("within the tie window the lowest step is hung, even when another rank is noticed first", "[hang]") {
  // Writers report at most every 200 ms-1 s: rank 0 happened to write its last report (step 41) before rank 1
  // wrote its last (step 40). Rank 1 is behind: it stopped first. The old watchdog named rank 0.
  std::vector<RankProgress> ranks = {progress(0, 1000ms, 41), progress(1, 1600ms, 40)};
  std::optional<HangVerdict> verdict = decide_hang(ranks, t0 + 11s, 10);
  REQUIRE(verdict);
  CHECK(local_ranks(verdict->hung) == std::vector<int>{1});
  CHECK(local_ranks(verdict->waiting) == std::vector<int>{0});
  CHECK(verdict->tied.empty());

  // Beyond the window time decides: rank 0 stopped long before, whatever its step.
  ranks = {progress(0, 1000ms, 900), progress(1, 3000ms, 40)};
  verdict = decide_hang(ranks, t0 + 11s, 10);
  REQUIRE(verdict);
  CHECK(local_ranks(verdict->hung) == std::vector<int>{0});

  // The same step within the window: the earliest, and the tie is said.
  ranks = {progress(0, 1400ms, 40), progress(1, 1000ms, 40), progress(2, 1300ms, 41)};
  verdict = decide_hang(ranks, t0 + 11s, 10);
  REQUIRE(verdict);
  CHECK(local_ranks(verdict->hung) == std::vector<int>{1});
  CHECK(verdict->tied == std::vector<int>{0});

  // Touched only (no steps): the earliest; every rank in the window is tied with it.
  ranks = {progress(0, 1400ms, std::nullopt), progress(1, 1000ms, 40)};
  verdict = decide_hang(ranks, t0 + 11s, 10);
  REQUIRE(verdict);
  CHECK(local_ranks(verdict->hung) == std::vector<int>{1});
  CHECK(verdict->tied == std::vector<int>{0});
}

TEST_CASE("a stopped process is hung whatever its times, a rank silent less than half the timeout goes on", "[hang]") {
  std::vector<RankProgress> ranks = {progress(0, 1000ms, 41), progress(1, 1900ms, 42), progress(2, 9000ms, 50)};
  ranks[1].stopped = true;
  std::optional<HangVerdict> verdict = decide_hang(ranks, t0 + 11s, 10);
  REQUIRE(verdict);
  CHECK(local_ranks(verdict->hung) == std::vector<int>{1});
  CHECK(verdict->hung[0].stopped);
  CHECK(local_ranks(verdict->waiting) == std::vector<int>{0});  // rank 2 reported 2 s ago: not stalled
  CHECK(verdict->tied.empty());
}

TEST_CASE("HangWatch: reports, exits, the once-only notice of ranks that never reported, deadlines", "[hang]") {
  HangWatch watch(3, 10);
  watch.start_attempt(t0);
  CHECK(*watch.next_deadline() == t0 + 10s);  // when ranks that never reported are noticed
  CHECK(watch.take_unreported(t0 + 9s).empty());
  watch.on_progress(0, t0 + 2s, 7);
  watch.on_progress(0, t0 + 1s, 8);  // a report dated earlier does not move the time back
  CHECK(watch.rank(0).last_progress == t0 + 2s);
  CHECK(watch.rank(0).last_step == 8);
  watch.on_exit(2);
  CHECK(watch.take_unreported(t0 + 10s) == std::vector<int>{1});
  CHECK(watch.take_unreported(t0 + 20s).empty());
  CHECK(*watch.next_deadline() == t0 + 12s);
  int asked = 0;
  const auto stopped = [&asked](int) {
    ++asked;
    return false;
  };
  CHECK_FALSE(watch.check(t0 + 11s, stopped));
  CHECK(asked == 0);  // evidence is gathered only when a hang is due
  std::optional<HangVerdict> verdict = watch.check(t0 + 12s, stopped);
  REQUIRE(verdict);
  CHECK(asked == 1);
  CHECK(local_ranks(verdict->hung) == std::vector<int>{0});
  watch.start_attempt(t0 + 30s);  // a restart: progress forgotten, the notice is not repeated
  CHECK_FALSE(watch.rank(0).reported);
  CHECK(watch.take_unreported(t0 + 40s) == std::vector<int>{0, 2});
  CHECK_FALSE(watch.next_deadline());
  CHECK_FALSE(HangWatch(2, 0).next_deadline());
}

TEST_CASE("the detection line names the hung rank, its last step and the ranks waiting", "[hang]") {
  CHECK(rank_list({3}) == "rank 3");
  CHECK(rank_list({2, 0, 1, 5, 7, 8}) == "ranks 0-2, 5, 7, 8");
  std::vector<RankProgress> ranks = {progress(0, 1500ms, 41), progress(1, 1000ms, 41), progress(2, 1500ms, 41),
                                     progress(3, 500ms, 40)};
  std::optional<HangVerdict> verdict = decide_hang(ranks, t0 + 10500ms, 10);
  REQUIRE(verdict);
  const std::string line = describe_hang(
      *verdict, [](int local_rank) { return local_rank + 4; },
      [](SteadyTime time) {
        return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(time - t0).count()) + "ms";
      });
  CHECK(line == "rank 7 hung: no progress for 10 s (last step 40 at 500ms); ranks 4-6 waiting since 1000ms");
  ranks[3].last_step = std::nullopt;
  ranks[3].last_progress = t0 + 900ms;
  verdict = decide_hang(ranks, t0 + 10900ms, 10);
  REQUIRE(verdict);
  CHECK(describe_hang(
            *verdict, [](int local_rank) { return local_rank; }, [](SteadyTime) { return "T"; }) ==
        "rank 3 hung: no progress for 10 s (last report at T); ranks 0-2 waiting since T (progress alone cannot "
        "tell ranks 0-2 from rank 3: same step, stopped within 1 s of it)");
}

TEST_CASE("the stacks settle a tie: the one rank outside any collective while the others wait in one", "[hang]") {
  using Frames = std::vector<std::string>;
  const Frames waiting = {"all_reduce (distributed_c10d.py:2501) < step (train.py:40)", "worker thread"};
  const Frames stuck = {"time.sleep (train.py:12) < step (train.py:38)"};
  CHECK(settled_by_stacks({waiting, stuck, waiting}) == std::optional<std::size_t>(1));
  CHECK_FALSE(settled_by_stacks({waiting, waiting}));       // nobody outside: the stacks do not say
  CHECK_FALSE(settled_by_stacks({stuck, stuck, waiting}));  // two outside: nor here
  CHECK_FALSE(settled_by_stacks({waiting, Frames{}}));      // a rank without frames
  CHECK_FALSE(settled_by_stacks({waiting, Frames{""}, stuck}));
  CHECK_FALSE(settled_by_stacks({stuck}));  // no rank waits in a collective
}
