// Console deduplication (output/console_dedup.hpp): identical whole lines of several ranks within the window leave
// once as "[ranks a-b] text", in the order they first came; a line of one rank leaves behind its own prefix; the
// window, the completion by every rank and the bounds on what is held. Through ConsoleWriter: other output releases
// what is held first. Copies that are sets of ranks (the --hosts launcher's, one per agent's line): rank sets, the
// strict reading of a line's rank prefix, merging across origins, and lines that keep their place.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "output/console_dedup.hpp"
#include "output/console_writer.hpp"
#include "util/fd.hpp"
#include "util/strings.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;
using Released = ConsoleDedup::Released;
using Clock = ConsoleDedup::Clock;

namespace {

std::string prefix_of(int rank) { return "[rank " + std::to_string(rank) + "] "; }

std::vector<std::string> shown(const std::vector<Released>& lines) {
  std::vector<std::string> text;
  for (const Released& line : lines) text.push_back((line.to_stderr ? "E " : "O ") + line.prefix + line.text);
  return text;
}

}  // namespace

TEST_CASE("rank runs: compact for the console, prose for messages", "[console_dedup]") {
  CHECK(rank_runs({0, 1, 2, 3}, RankRuns::Compact) == "0-3");
  CHECK(rank_runs({9, 0, 1, 2, 3, 4, 5, 6, 7}, RankRuns::Compact) == "0-7,9");
  CHECK(rank_runs({5}, RankRuns::Compact) == "5");
  CHECK(rank_runs({1, 3, 3, 4}, RankRuns::Compact) == "1,3-4");
  CHECK(rank_runs({}, RankRuns::Compact).empty());
  CHECK(rank_runs({8, 0, 1, 2, 5, 7}, RankRuns::Prose) == "0-2, 5, 7, 8");
  CHECK(rank_runs({0, 1}, RankRuns::Prose) == "0, 1");
}

TEST_CASE("a line every rank printed leaves at once, as one line naming the ranks", "[console_dedup]") {
  ConsoleDedup dedup(4);
  std::vector<Released> out;
  const auto t0 = Clock::now();
  for (int rank : {2, 0, 3}) dedup.add(false, rank, prefix_of(rank), "epoch 1 done", t0, out);
  CHECK(out.empty());  // held: rank 1 has not printed it yet
  CHECK(dedup.deadline() == t0 + ConsoleDedup::kWindow);
  dedup.add(false, 1, prefix_of(1), "epoch 1 done", t0 + 5ms, out);
  CHECK(shown(out) == std::vector<std::string>{"O [ranks 0-3] epoch 1 done"});
  CHECK(dedup.empty());
}

TEST_CASE("after the window, what some ranks printed leaves, and a line of one rank keeps its prefix",
          "[console_dedup]") {
  ConsoleDedup dedup(4);
  std::vector<Released> out;
  const auto t0 = Clock::now();
  dedup.add(false, 0, prefix_of(0), "loss 0.5", t0, out);
  dedup.add(false, 1, prefix_of(1), "loss 0.5", t0 + 1ms, out);
  dedup.add(true, 2, prefix_of(2), "loss 0.5", t0 + 2ms, out);  // stderr: another line
  dedup.add(false, 3, prefix_of(3), "loss 0.7", t0 + 3ms, out);
  dedup.release_due(t0 + ConsoleDedup::kWindow - 1ms, out);
  CHECK(out.empty());
  dedup.release_due(t0 + ConsoleDedup::kWindow + 2ms, out);
  CHECK(shown(out) == std::vector<std::string>{"O [ranks 0-1] loss 0.5", "E [rank 2] loss 0.5"});
  out.clear();
  dedup.release_due(t0 + ConsoleDedup::kWindow + 3ms, out);
  CHECK(shown(out) == std::vector<std::string>{"O [rank 3] loss 0.7"});
}

TEST_CASE("each rank's lines keep their order, and a rank's second copy is a line of its own", "[console_dedup]") {
  ConsoleDedup dedup(2);
  std::vector<Released> out;
  const auto t0 = Clock::now();
  dedup.add(false, 0, prefix_of(0), "a", t0, out);
  dedup.add(false, 0, prefix_of(0), "b", t0, out);
  dedup.add(false, 0, prefix_of(0), "a", t0, out);  // rank 0 again: not merged into its own first "a"
  dedup.add(false, 1, prefix_of(1), "a", t0, out);  // completes the first "a": it leaves, "b" waits at the front
  CHECK(shown(out) == std::vector<std::string>{"O [ranks 0-1] a"});
  dedup.add(false, 1, prefix_of(1), "b", t0, out);
  dedup.add(false, 1, prefix_of(1), "a", t0, out);
  CHECK(shown(out) == std::vector<std::string>{"O [ranks 0-1] a", "O [ranks 0-1] b", "O [ranks 0-1] a"});
}

TEST_CASE("what is held is bounded, and release_all empties it in order", "[console_dedup]") {
  ConsoleDedup dedup(8);
  std::vector<Released> out;
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < ConsoleDedup::kMaxHeldLines + 10; ++i) {
    dedup.add(false, 0, prefix_of(0), "line " + std::to_string(i), t0, out);
  }
  REQUIRE(out.size() == 10);  // the oldest left early
  CHECK(out.front().text == "line 0");
  out.clear();
  dedup.add(false, 1, prefix_of(1), "held", t0, out);
  REQUIRE(out.size() == 1);
  out.clear();
  dedup.add(false, 1, prefix_of(1), std::string(ConsoleDedup::kMaxHeldBytes, 'x'), t0, out);
  CHECK(dedup.empty());  // past the bytes bound: everything left, in order, the long line itself last
  REQUIRE(out.size() == ConsoleDedup::kMaxHeldLines + 1);
  CHECK(out.front().text == "line 11");
  CHECK(out.back().text.size() == ConsoleDedup::kMaxHeldBytes);
  dedup.add(false, 1, prefix_of(1), "again", t0, out);
  out.clear();
  dedup.release_all(out);
  CHECK(shown(out) == std::vector<std::string>{"O [rank 1] again"});
  CHECK(dedup.empty());
}

TEST_CASE("through the console: held lines leave before anything else is written", "[console_dedup]") {
  Pipe pipe = make_pipe();
  std::string text;
  {
    ConsoleWriter console(pipe.write.get(), pipe.write.get());
    console.set_dedup(3);
    int owners[3] = {};
    console.add_rank_line(false, &owners[0], 0, "[rank 0] ", "same");
    console.add_rank_line(false, &owners[1], 1, "[rank 1] ", "same");
    console.add_text(false, "mgtrain: a message\n");  // releases "same" of ranks 0-1 first
    console.add_rank_line(false, &owners[2], 2, "[rank 2] ", "same");
    console.add_rank_line(false, &owners[0], 0, "[rank 0] ", "last");
    console.set_dedup(std::nullopt);  // releases
    console.add_rank_line(false, &owners[1], 1, "[rank 1] ", "plain");
    console.flush();
  }
  pipe.write.reset();
  char buffer[4096];
  ssize_t got = 0;
  while ((got = read(pipe.read.get(), buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(got));
  CHECK(text == "[ranks 0-1] same\nmgtrain: a message\n[rank 2] same\n[rank 0] last\n[rank 1] plain\n");
}

// ---- copies that are sets of ranks: the --hosts launcher merging its agents' lines (hosts/hosts_console.hpp) ----

namespace {

RankSet ranks_of(std::initializer_list<int> ranks) {
  RankSet set;
  for (int rank : ranks) set.insert(rank, rank);
  return set;
}

}  // namespace

TEST_CASE("rank sets: runs merged as ranks come, written as rank_runs writes them", "[console_dedup]") {
  RankSet set;
  CHECK(set.empty());
  set.insert(4, 5);
  set.insert(0, 1);
  set.insert(9, 9);
  CHECK(set.text() == "0-1,4-5,9");
  set.insert(2, 3);  // joins 0-1 and 4-5 into one run
  CHECK(set.runs() == std::vector<RankSet::Run>{{0, 5}, {9, 9}});
  CHECK(set.size() == 7);
  CHECK(set.intersects(ranks_of({3})));
  CHECK_FALSE(set.intersects(ranks_of({6, 7, 8, 10})));
  set.insert(5, 2);  // first > last: nothing
  CHECK(set.size() == 7);
  RankSet other;
  other.insert(7, 8);
  set.insert(other);
  CHECK(set.runs() == std::vector<RankSet::Run>{{0, 5}, {7, 9}});
  // The same text as rank_runs for every set of ranks below 9.
  for (int bits = 0; bits < 512; ++bits) {
    std::vector<int> ranks;
    RankSet built;
    for (int rank = 8; rank >= 0; --rank) {
      if (!(bits & (1 << rank))) continue;
      ranks.push_back(rank);
      built.insert(rank, rank);
    }
    INFO(bits);
    CHECK(built.text() == rank_runs(ranks, RankRuns::Compact));
    CHECK(built.size() == static_cast<std::int64_t>(ranks.size()));
  }
  RankSet huge;
  huge.insert(0, 2147483647);  // one run, whatever the job's size
  CHECK(huge.size() == 2147483648LL);
  CHECK(huge.text() == "0-2147483647");
}

TEST_CASE("the rank prefix of a console line is read strictly", "[console_dedup]") {
  auto parsed = [](std::string_view line, int limit = 1000) -> std::string {
    const std::optional<RankPrefix> prefix = parse_rank_prefix(line, limit);
    if (!prefix) return "none";
    return prefix->ranks.text() + "|" + std::string(line.substr(prefix->length));
  };
  CHECK(parsed("[rank 0] loading data") == "0|loading data");
  CHECK(parsed("[rank 17] ") == "17|");  // an empty line still names its rank
  CHECK(parsed("[ranks 0-3] same") == "0-3|same");
  CHECK(parsed("[ranks 0-3,5,7-8] [rank 9] x") == "0-3,5,7-8|[rank 9] x");  // the text is left as it is
  CHECK(parsed("[ranks 3-4] x") == "3-4|x");
  // Not as mgtrain writes it: no rank prefix, the line passes as it is.
  for (const char* line : {"mgtrain: run r1 succeeded",
                           "[rank 01] x",
                           "[rank 3]x",
                           "[rank 3]",
                           "[rank  3] x",
                           "[rank -1] x",
                           "[rank x] x",
                           "[Rank 3] x",
                           "[ranks 0,1] x",
                           "[ranks 0-0] x",
                           "[ranks 5] x",
                           "[ranks 3,1] x",
                           "[ranks 0-3,4] x",
                           "[ranks 0-3,2-5] x",
                           "[ranks 4-2] x",
                           "[ranks 0-3,] x",
                           "[ranks ,0-3] x",
                           "[ranks 0--3] x",
                           "[ranks 0-3]x",
                           "[ranks 0-99999999999] x",
                           " [rank 3] x",
                           "[default0]:x",
                           "",
                           "[rank 1000] x",
                           "[ranks 999-1000] x"}) {
    INFO(line);
    CHECK(parsed(line) == "none");
  }
  CHECK(parsed("[rank 3] x", 4) == "3|x");
  CHECK(parsed("[rank 4] x", 4) == "none");  // beyond the job's ranks
  CHECK(parsed("[rank 2147483647] x", 2147483647) == "none");
  CHECK(parsed("[rank 2147483646] x", 2147483647) == "2147483646|x");
}

TEST_CASE("copies that are sets of ranks merge across origins, and a set of every rank leaves at once",
          "[console_dedup]") {
  ConsoleDedup dedup(8);
  std::vector<Released> out;
  const auto t0 = Clock::now();
  dedup.add(false, ranks_of({0, 1, 2, 3}), "[a] ", "[a] [ranks 0-3] ", "loading data", t0, out);
  CHECK(out.empty());  // held: ranks 4-7 may print it too
  dedup.add(false, ranks_of({4, 5, 6, 7}), "[b] ", "[b] [ranks 4-7] ", "loading data", t0 + 10ms, out);
  CHECK(shown(out) == std::vector<std::string>{"O [ranks 0-7] loading data"});  // the hosts are gone
  out.clear();
  dedup.add(false, ranks_of({0, 1, 2, 3, 4, 5, 6, 7}), "[a] ", "[a] [ranks 0-7] ", "all", t0, out);
  CHECK(shown(out) == std::vector<std::string>{"O [a] [ranks 0-7] all"});  // one copy: as it came, at once
  CHECK(dedup.empty());

  // [ranks 0-1] + [ranks 2-3] of two hosts in a job of 4: complete, released at once.
  out.clear();
  ConsoleDedup four(4);
  four.add(false, ranks_of({0, 1}), "[a] ", "[a] [ranks 0-1] ", "same line", t0, out);
  CHECK(out.empty());
  four.add(false, ranks_of({2, 3}), "[b] ", "[b] [ranks 2-3] ", "same line", t0 + 1ms, out);
  CHECK(shown(out) == std::vector<std::string>{"O [ranks 0-3] same line"});
}

TEST_CASE("sets: an origin's copies keep its name, streams and shared ranks stay apart, a lone copy keeps its prefix",
          "[console_dedup]") {
  ConsoleDedup dedup(8);
  std::vector<Released> out;
  const auto t0 = Clock::now();
  dedup.add(false, ranks_of({0}), "[a] ", "[a] [rank 0] ", "x", t0, out);
  dedup.add(false, ranks_of({1}), "[a] ", "[a] [rank 1] ", "x", t0, out);        // the same origin: "[a] " stays
  dedup.add(true, ranks_of({2, 3}), "[b] ", "[b] [ranks 2-3] ", "x", t0, out);   // stderr: another line
  dedup.add(false, ranks_of({1, 2}), "[b] ", "[b] [ranks 1-2] ", "x", t0, out);  // shares rank 1: a copy of its own
  dedup.add(false, ranks_of({4, 5}), "[c] ", "[c] [ranks 4-5] ", "y", t0, out);
  CHECK(out.empty());
  dedup.release_due(t0 + ConsoleDedup::kWindow, out);
  CHECK(shown(out) == std::vector<std::string>{"O [a] [ranks 0-1] x", "E [b] [ranks 2-3] x", "O [b] [ranks 1-2] x",
                                               "O [c] [ranks 4-5] y"});
  CHECK(dedup.empty());
}

TEST_CASE("a line that is not deduplicated keeps its place behind held lines", "[console_dedup]") {
  ConsoleDedup dedup(4);
  std::vector<Released> out;
  const auto t0 = Clock::now();
  dedup.add_other(true, "[a] ", "mgtrain: nothing held: at once", t0, out);
  CHECK(shown(out) == std::vector<std::string>{"E [a] mgtrain: nothing held: at once"});
  out.clear();
  dedup.add(false, ranks_of({0, 1}), "[a] ", "[a] [ranks 0-1] ", "same line", t0, out);
  dedup.add_other(true, "[b] ", "mgtrain: round 0", t0 + 1ms, out);
  dedup.add_other(false, "[b] ", "same line", t0 + 1ms, out);  // the same text, but no rank's: never merged
  CHECK(out.empty());
  CHECK(dedup.deadline() == t0 + ConsoleDedup::kWindow);
  dedup.add(false, ranks_of({2, 3}), "[b] ", "[b] [ranks 2-3] ", "same line", t0 + 2ms, out);
  CHECK(shown(out) == std::vector<std::string>{"O [ranks 0-3] same line", "E [b] mgtrain: round 0", "O [b] same line"});
  CHECK(dedup.empty());
  out.clear();
  dedup.add(false, ranks_of({0}), "[a] ", "[a] [rank 0] ", "z", t0, out);
  dedup.add_other(false, "[a] ", "z", t0, out);
  dedup.release_all(out);
  CHECK(shown(out) == std::vector<std::string>{"O [a] [rank 0] z", "O [a] z"});
}
