// Live console output: partial lines after a short hold, '\r' updates at once, the console's open line,
// and the log files' whole, cleaned lines.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "output/console_writer.hpp"
#include "output/live_line_splitter.hpp"
#include "output/log_line_cleaner.hpp"
#include "util/fd.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;

namespace {

using Clock = LiveLineSplitter::Clock;

// Pieces as text: "text|" for a complete line, "text~" for a partial one, "!" marks a whole line.
struct Pieces {
  std::vector<std::string> got;
  LiveLineSplitter::PieceSink sink() {
    return [this](const LiveLineSplitter::Piece& piece) {
      got.push_back((piece.whole ? "!" : "") + std::string(piece.text) + (piece.ends_line ? "|" : "~"));
    };
  }
};

// All that `fd` (a pipe's read end, non-blocking) has now.
std::string drain(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t got;
  while ((got = read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(got));
  return text;
}

}  // namespace

TEST_CASE("whole lines come out whole, a partial rest waits for the hold, then comes out live", "[live]") {
  LiveLineSplitter splitter(50ms);
  Pieces pieces;
  const Clock::time_point t0 = Clock::now();
  splitter.feed("one\ntw", t0, pieces.sink());
  CHECK(pieces.got == std::vector<std::string>{"!one|"});
  REQUIRE(splitter.deadline());
  CHECK(*splitter.deadline() == t0 + 50ms);
  splitter.on_time(t0 + 49ms, pieces.sink());
  CHECK(pieces.got.size() == 1);
  splitter.feed("o\n", t0 + 10ms, pieces.sink());  // completed within the hold: still one whole line
  CHECK(pieces.got == std::vector<std::string>{"!one|", "!two|"});
  CHECK_FALSE(splitter.deadline());

  splitter.feed("thr", t0 + 100ms, pieces.sink());
  splitter.feed("ee", t0 + 120ms, pieces.sink());  // the deadline counts from the first held byte
  splitter.on_time(t0 + 150ms, pieces.sink());
  CHECK(pieces.got.back() == "three~");
  splitter.feed(" and more\n", t0 + 400ms, pieces.sink());
  CHECK(pieces.got.back() == " and more|");  // the rest of a line shown in part: not whole
}

TEST_CASE("text up to a line's last carriage return goes out at once", "[live]") {
  LiveLineSplitter splitter(50ms);
  Pieces pieces;
  const Clock::time_point t0 = Clock::now();
  splitter.feed("a\r", t0, pieces.sink());
  CHECK(pieces.got == std::vector<std::string>{"a\r~"});
  CHECK_FALSE(splitter.deadline());
  splitter.feed("\r 10%\r 20", t0, pieces.sink());
  CHECK(pieces.got.back() == "\r 10%\r~");
  splitter.on_time(t0 + 50ms, pieces.sink());
  CHECK(pieces.got.back() == " 20~");
  splitter.feed("%\n", t0 + 60ms, pieces.sink());
  CHECK(pieces.got.back() == "%|");
  splitter.feed("tail", t0 + 70ms, pieces.sink());
  splitter.finish(pieces.sink());
  CHECK(pieces.got.back() == "!tail|");
  splitter.finish(pieces.sink());
  CHECK(pieces.got.back() == "!tail|");  // nothing more
}

TEST_CASE("marked progress lines are only ever delivered whole, long text is bounded", "[live]") {
  LiveLineSplitter splitter(50ms, 8);
  Pieces pieces;
  const Clock::time_point t0 = Clock::now();
  splitter.feed("\x1emgtr", t0, pieces.sink());
  CHECK_FALSE(splitter.deadline());
  splitter.on_time(t0 + 1s, pieces.sink());
  CHECK(pieces.got.empty());
  splitter.feed("ain:bar-end\n", t0, pieces.sink());
  CHECK(pieces.got.back() == "!:bar-end|");  // cut at 8 bytes, each piece whole
  CHECK(pieces.got.front() == "!\x1emgtrain|");
  splitter.feed("0123456789", t0, pieces.sink());  // ordinary text beyond the limit goes out at once
  CHECK(pieces.got.back() == "0123456789~");
}

TEST_CASE("log files get whole lines in their final state", "[live][log]") {
  LogLineCleaner plain(false);
  CHECK(plain.feed("a\r") == "");
  CHECK(plain.feed("b\nc") == "b\n");  // the '\r' update replaced "a"
  CHECK(plain.feed(" 10%\r 20%\r100%\r\n") == "100%\n");
  LogLineCleaner bar(false);
  CHECK(bar.feed("\r 10%|#  |\r 50%|## |\r100%|###|\r\n") == "100%|###|\n");  // "\r\n" is a plain end
  CHECK(bar.feed("\x1b[31mred\x1b[0m\n") == "\x1b[31mred\x1b[0m\n");          // pipes: escapes kept
  CHECK(bar.feed("cut") == "");
  CHECK(bar.finish() == "cut");

  LogLineCleaner terminal(true);
  CHECK(terminal.feed("\x1b[1;31mre") == "");
  CHECK(terminal.feed("d\x1b[0m \x1b]0;title\x07ok\x1b(B\x1b") == "");
  CHECK(terminal.feed("[K\x07\n") == "red ok\n");  // CSI, OSC, charset and BEL gone, even across reads

  LogLineCleaner bounded(false, 4);
  CHECK(bounded.feed("abcdefghij") == "abcdefgh");
  CHECK(bounded.feed("\n") == "ij\n");
}

TEST_CASE("the console shows a line in part behind its prefix and ends it when others write", "[live][console]") {
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  fcntl(out.read.get(), F_SETFL, O_NONBLOCK);
  fcntl(err.read.get(), F_SETFL, O_NONBLOCK);
  ConsoleWriter console(out.write.get(), err.write.get());
  int rank0 = 0, rank1 = 0;
  console.add_piece(false, &rank0, "[rank 0] ", "a\r", false);
  console.flush();
  CHECK(drain(out.read.get()) == "[rank 0] a\r");
  console.add_piece(false, &rank0, "[rank 0] ", "b", false);
  console.add_piece(false, &rank0, "[rank 0] ", "c\r", false);
  console.flush();
  CHECK(drain(out.read.get()) == "[rank 0] bc\r");  // the prefix again after '\r', once text follows
  console.add_line(false, "[rank 1] ", "whole");    // another writer: the open line ends first
  console.add_piece(false, &rank0, "[rank 0] ", "d", true);
  console.add_piece(false, &rank1, "[rank 1] ", "", true);
  console.flush();
  CHECK(drain(out.read.get()) == "\n[rank 1] whole\n[rank 0] d\n[rank 1] \n");
  console.add_piece(true, &rank1, "[rank 1] ", "err part", false);
  console.add_piece(false, &rank0, "[rank 0] ", "out", true);  // another destination: nothing to end there
  console.flush();
  CHECK(drain(err.read.get()) == "[rank 1] err part");
  CHECK(drain(out.read.get()) == "[rank 0] out\n");
  console.message(log::Level::Warning, "note");  // the launcher's own message ends the open stderr line
  console.flush();
  CHECK(drain(err.read.get()) == "\nmgtrain: warning: note\n");
}
