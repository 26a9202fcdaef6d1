// Whole lines for the console: partial lines wait, tails flush at the end, long lines are cut.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "output/line_splitter.hpp"

using namespace mgtrain;

namespace {
struct Collected {
  std::vector<std::string> lines;
  LineSplitter::LineSink sink() {
    return [this](std::string_view line) { lines.emplace_back(line); };
  }
};
}  // namespace

TEST_CASE("complete lines come out, partial ones wait for their end", "[lines]") {
  LineSplitter splitter;
  Collected got;
  splitter.feed("alpha\nbe", got.sink());
  CHECK(got.lines == std::vector<std::string>{"alpha"});
  CHECK(splitter.has_partial_line());
  splitter.feed("ta\n\ngam", got.sink());
  CHECK(got.lines == std::vector<std::string>{"alpha", "beta", ""});
  splitter.feed("ma", got.sink());
  splitter.finish(got.sink());
  CHECK(got.lines == std::vector<std::string>{"alpha", "beta", "", "gamma"});
  splitter.finish(got.sink());  // nothing left: no empty line
  CHECK(got.lines.size() == 4);
}

TEST_CASE("a line fed byte by byte is delivered once, whole", "[lines]") {
  LineSplitter splitter;
  Collected got;
  for (char c : std::string("hello world\n")) splitter.feed(std::string_view(&c, 1), got.sink());
  CHECK(got.lines == std::vector<std::string>{"hello world"});
}

TEST_CASE("over-long lines are cut into pieces of the maximum size", "[lines]") {
  LineSplitter splitter(4);
  Collected got;
  splitter.feed("abcdefghij", got.sink());  // no newline yet: memory stays bounded
  CHECK(got.lines == std::vector<std::string>{"abcd", "efgh"});
  splitter.feed("k\n0123456789\n", got.sink());
  CHECK(got.lines == std::vector<std::string>{"abcd", "efgh", "ijk", "0123", "4567", "89"});
}

TEST_CASE("cuts do not split a UTF-8 character", "[lines]") {
  LineSplitter splitter(4);
  Collected got;
  splitter.feed("ab\xC3\xA9" "cd\n", got.sink());  // "abécd": é is 2 bytes at offsets 2-3
  CHECK(got.lines == std::vector<std::string>{"ab\xC3\xA9", "cd"});
  Collected got2;
  LineSplitter splitter2(3);
  splitter2.feed("ab\xC3\xA9" "\n", got2.sink());  // a cut at 3 would split é: cut at 2
  CHECK(got2.lines == std::vector<std::string>{"ab", "\xC3\xA9"});
}
