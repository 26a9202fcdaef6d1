// Console deduplication (output/console_dedup.hpp): identical whole lines of several ranks within the window leave
// once as "[ranks a-b] text", in the order they first came; a line of one rank leaves behind its own prefix; the
// window, the completion by every rank and the bounds on what is held. Through ConsoleWriter: other output releases
// what is held first.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <string>
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
