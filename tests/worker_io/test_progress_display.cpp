// Rank 0's progress, formatted with fixed numbers and widths: the plain line scripts grep for, the bar
// fitted to a terminal, the marked lines through the launcher (console and log file), and the console's
// live status line.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>
#include <string>
#include <vector>

#include "contract/console_progress.hpp"
#include "output/console_writer.hpp"
#include "worker_io/progress_display.hpp"

using namespace mgtrain;

namespace {

ProgressSnapshot sample() {
  ProgressSnapshot p;
  p.step = 120;
  p.total_steps = 1000;
  p.epoch = 1;
  p.loss = 0.53124;
  p.lr = 0.01;
  p.samples_per_s = 5012.3;
  p.eta_s = 80;
  p.elapsed_s = 11;
  return p;
}

// Everything written to a pipe's write end, read back after the writer is done.
struct Pipe {
  int fds[2];
  Pipe() { REQUIRE(::pipe2(fds, O_CLOEXEC) == 0); }
  ~Pipe() {
    ::close(fds[0]);
    if (fds[1] >= 0) ::close(fds[1]);
  }
  std::string drain() {
    ::close(fds[1]);
    fds[1] = -1;
    std::string out;
    char buffer[4096];
    for (ssize_t got; (got = ::read(fds[0], buffer, sizeof buffer)) > 0;)
      out.append(buffer, static_cast<std::size_t>(got));
    return out;
  }
};

}  // namespace

TEST_CASE("the plain progress line keeps the format scripts grep for", "[progress]") {
  CHECK(format_progress_line(sample()) ==
        "mgtrain: step 120/1000 epoch 1 loss 0.5312 lr 0.01 5012 samples/s eta 1m20s");
  ProgressSnapshot long_run = sample();
  long_run.eta_s = 7500;
  long_run.lr = 0.000123456;
  CHECK(format_progress_line(long_run) ==
        "mgtrain: step 120/1000 epoch 1 loss 0.5312 lr 0.00012346 5012 samples/s eta 2h05m");
}

TEST_CASE("the bar fills the width it is given, at most 40 columns of bar", "[progress]") {
  CHECK(format_progress_bar(sample(), 200) ==
        "epoch 1 step 120/1000 [====>                                   ]  12% loss 0.5312 lr 0.01 5012 samples/s ETA "
        "1m20s");
  CHECK(format_progress_bar(sample(), 90) ==
        "epoch 1 step 120/1000 [=>              ]  12% loss 0.5312 lr 0.01 5012 samples/s ETA 1m20s");
  CHECK(format_progress_bar(sample(), 90).size() == 90);
}

TEST_CASE("a narrower terminal gets the compact text, then no bar, then the text cut", "[progress]") {
  // 80 columns behind the launcher's "[rank 0] " prefix leave 71.
  CHECK(format_progress_bar(sample(), 71) == "ep 1 [==>                  ] 120/1000  12% loss 0.5312 5012/s ETA 1m20s");
  CHECK(format_progress_bar(sample(), 71).size() == 71);
  CHECK(format_progress_bar(sample(), 60) == "ep 1 [=>        ] 120/1000  12% loss 0.5312 5012/s ETA 1m20s");
  CHECK(format_progress_bar(sample(), 50) == "ep 1 120/1000  12% loss 0.5312 5012/s ETA 1m20s");
  CHECK(format_progress_bar(sample(), 30) == "ep 1 120/1000  12% loss 0.5312");
  CHECK(format_progress_bar(sample(), 0).empty());
}

TEST_CASE("a finished bar is full and says how long it took", "[progress]") {
  ProgressSnapshot done = sample();
  done.step = 1000;
  CHECK(format_progress_bar(done, 120) ==
        "epoch 1 step 1000/1000 [========================================] 100% loss 0.5312 lr 0.01 5012 samples/s in "
        "11s");
  ProgressSnapshot start = sample();
  start.step = 0;
  CHECK(format_progress_bar(start, 120) ==
        "epoch 1 step 0/1000 [                                        ]   0% loss 0.5312 lr 0.01 5012 samples/s ETA "
        "1m20s");
}

TEST_CASE("marked lines are told apart from ordinary ones", "[progress]") {
  CHECK(classify_console_line("mgtrain: step 1/2").kind == ConsoleLineKind::Ordinary);
  const ConsoleLine bar = classify_console_line("\x1emgtrain:bar epoch 1 step 3/4");
  CHECK(bar.kind == ConsoleLineKind::Bar);
  CHECK(bar.text == "epoch 1 step 3/4");
  CHECK(classify_console_line("\x1emgtrain:bar-end").kind == ConsoleLineKind::BarEnd);
  const ConsoleLine log = classify_console_line("\x1emgtrain:log mgtrain: step 5/10");
  CHECK(log.kind == ConsoleLineKind::LogOnly);
  CHECK(log.text == "mgtrain: step 5/10");
  CHECK(classify_console_line("\x1e{\"json\":\"text sequence\"}").kind == ConsoleLineKind::Ordinary);
}

TEST_CASE("the log file gets no bar lines and the log-only lines without their marker", "[progress]") {
  const std::string stream = std::string("banner\n") + "\x1emgtrain:bar epoch 1 step 1/4 [=]\n" +
                             "\x1emgtrain:log mgtrain: step 2/4 epoch 1\n" + "\x1emgtrain:bar epoch 1 step 4/4\n" +
                             "\x1emgtrain:bar-end\n" + "\x1e{\"rs\":1}\n" + "partial";
  const std::string expected = "banner\nmgtrain: step 2/4 epoch 1\n\x1e{\"rs\":1}\npartial";
  ProgressLogFilter whole;
  CHECK(whole.feed(stream) + whole.finish() == expected);
  // Byte by byte: a marker split over reads is still recognised; ordinary bytes are not held back beyond it.
  ProgressLogFilter bytes;
  std::string out;
  for (char c : stream) out += bytes.feed(std::string_view(&c, 1));
  CHECK(out == expected);
  CHECK(bytes.finish().empty());
  ProgressLogFilter held;
  CHECK(held.feed("\x1emgtr").empty());  // may still become a marker
  CHECK(held.finish() == "\x1emgtr");
}

TEST_CASE("the console's status line is cleared for other lines and redrawn after them", "[progress]") {
  Pipe out, err;
  {
    ConsoleWriter console(out.fds[1], err.fds[1]);
    CHECK(console.stdout_terminal_columns() == 0);  // a pipe is no terminal
    console.add_line(false, "[rank 0] ", "banner");
    console.set_status("[rank 0] ", "bar 1");
    console.flush();
    console.set_status("[rank 0] ", "bar 2");
    console.flush();
    console.flush();  // unchanged: not drawn again
    console.add_line(false, "[rank 1] ", "hello");
    console.flush();
    console.finish_status();
    console.add_line(false, "[rank 0] ", "after");
  }
  CHECK(out.drain() ==
        "[rank 0] banner\n\r[rank 0] bar 1\x1b[K\r[rank 0] bar 2\x1b[K\r\x1b[K[rank 1] hello\n\r[rank 0] bar 2\x1b[K\n"
        "[rank 0] after\n");
  CHECK(err.drain().empty());
}
