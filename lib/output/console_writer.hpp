// The launcher's console: collects whole prefixed lines for its stdout and stderr and writes
// them in large blocks. A closed console (EPIPE, e.g. `| head`) silences it without stopping the job.
// On a terminal it can also keep one live status line (rank 0's progress bar, console_progress.hpp) at the
// bottom: redrawn in place with '\r', cleared before other lines are written and drawn again after them.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "util/log.hpp"

namespace mgtrain {

class ConsoleWriter {
 public:
  ConsoleWriter(int stdout_fd = 1, int stderr_fd = 2) : out_{stdout_fd, {}, false}, err_{stderr_fd, {}, false} {}
  ~ConsoleWriter() {
    finish_status();
    flush();
  }

  // Queues "<prefix><line>\n".
  void add_line(bool to_stderr, std::string_view prefix, std::string_view line);
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

  static constexpr std::size_t kFlushThreshold = 256 * 1024;

 private:
  struct Stream {
    int fd;
    std::string pending;
    bool broken;
  };
  static void flush_stream(Stream& stream);

  Stream out_;
  Stream err_;
  std::string status_;             // "" : none
  bool status_on_screen_ = false;  // drawn and the cursor still on its line
  bool status_changed_ = false;
};

}  // namespace mgtrain
