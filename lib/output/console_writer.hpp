// The launcher's console: collects prefixed lines for its stdout and stderr and writes them in large blocks.
// A worker's unfinished line is shown live (add_piece): its prefix in front, and again after each '\r' that
// more text follows. Anything else written to that destination meanwhile ends the shown part with a newline;
// the line then continues on a new line behind its prefix. A closed console (EPIPE, e.g. `| head`) silences it without
// stopping the job. On a terminal it can also keep one live status line (rank 0's progress bar, console_progress.hpp)
// at the bottom: redrawn in place with '\r', cleared before other lines are written and drawn again after them.
// With deduplication on (console_dedup.hpp), ranks' whole lines are held for a short window first; anything else
// written releases what is held before it, so the order stays.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "output/console_dedup.hpp"
#include "util/log.hpp"

namespace mgtrain {

class ConsoleWriter {
 public:
  ConsoleWriter(int stdout_fd = 1, int stderr_fd = 2);
  ~ConsoleWriter();

  // Queues "<prefix><line>\n".
  void add_line(bool to_stderr, std::string_view prefix, std::string_view line);
  // Queues a piece of `owner`'s current line (no '\n'; '\r' allowed); `ends_line` completes it.
  void add_piece(bool to_stderr, const void* owner, std::string_view prefix, std::string_view text, bool ends_line);
  // A whole line of global rank `rank`'s stream: held for deduplication when it is on, else (or when `owner` has a
  // line shown in part) as add_piece with ends_line.
  void add_rank_line(bool to_stderr, const void* owner, int rank, std::string_view prefix, std::string_view text);
  // Deduplication of the ranks' whole lines among `ranks_on_console` ranks; nullopt turns it off. Releases what is
  // held first.
  void set_dedup(std::optional<int> ranks_on_console);
  // When held lines are due (the loop wakes for them), and releasing them; release_held() releases everything.
  std::optional<std::chrono::steady_clock::time_point> held_deadline() const;
  void release_due(std::chrono::steady_clock::time_point now);
  void release_held();
  // Queues text as it is (a report of several lines).
  void add_text(bool to_stderr, std::string_view text);
  // Queues one of the launcher's own messages on stderr, worded as util/log.hpp words it ("mgtrain: ...").
  template <typename... Args>
  void message(log::Level level, fmt::format_string<Args...> format, Args&&... args) {
    add_text(true, log::format_line(level, fmt::format(format, std::forward<Args>(args)...)));
  }
  void flush();

  // The live status line: replaces the previous state ("<prefix><text>", cut to the terminal's width at
  // each redraw so it never wraps). finish_status() leaves its last state on screen as an ordinary line.
  void set_status(std::string_view prefix, std::string_view text);
  void finish_status();
  // The width of the terminal on stdout, or 0 when stdout is not a terminal.
  int stdout_terminal_columns() const;
  bool is_terminal(bool to_stderr) const { return isatty(to_stderr ? err_.fd : out_.fd) == 1; }
  // The size of the launcher's terminal (stdout's, else stderr's; 24x80 when neither is one), for a worker's
  // pseudo-terminal.
  winsize terminal_size() const;

  static constexpr std::size_t kFlushThreshold = 256 * 1024;

 private:
  // A worker line shown in part: whose, and whether the cursor is at its start.
  struct OpenLine {
    const void* owner = nullptr;
    bool at_start = true;    // nothing written since the prefix position (a fresh line, or after '\r')
    bool wrote_any = false;  // the prefix was written at least once
  };
  struct Stream {
    int fd;
    std::string pending;
    bool broken;
    OpenLine open;  // the worker line shown in part here, if any
  };
  static void flush_stream(Stream& stream);
  // Ends the line shown in part on `stream` (if any) with a newline, before something is written to `target`.
  void end_open_line(Stream& stream, Stream& target);
  // Before anything else goes to `target`: ends the lines shown in part there (and on the other stream when
  // both lead to the same place).
  void end_open_lines(Stream& target);
  bool open_line_on_stdout() const { return out_.open.owner != nullptr || (shared_ && err_.open.owner != nullptr); }
  void write_released();

  Stream out_;
  Stream err_;
  bool shared_ = false;            // stdout and stderr are the same terminal, pipe or file
  std::string status_;             // "" : none
  bool status_on_screen_ = false;  // drawn and the cursor still on its line
  bool status_changed_ = false;
  std::unique_ptr<ConsoleDedup> dedup_;           // null: off
  std::vector<ConsoleDedup::Released> released_;  // reused
};

}  // namespace mgtrain
