// One worker stream (stdout or stderr): copies every byte from its pipe to the rank's log file and,
// when routed to the console, each whole line with a "[rank N] " prefix. Rank 0's marked progress lines
// (console_progress.hpp) become the console's live status line and stay out of the log file.
#pragma once

#include <string>

#include "contract/console_progress.hpp"
#include "output/console_writer.hpp"
#include "util/fd.hpp"
#include "output/line_splitter.hpp"

namespace mgtrain {

class StreamCapture {
 public:
  // Owns `pipe` (non-blocking read end). Opens (truncates) `log_path`.
  // Throws SystemError when the log file cannot be created.
  StreamCapture(Fd pipe, const std::string& log_path, bool is_stderr, bool to_console, int global_rank);

  int fd() const { return pipe_.get(); }
  bool open() const { return pipe_.valid(); }
  // Reads what the pipe has (one bounded read); at end of stream flushes the partial line and closes.
  void read_available(ConsoleWriter& console);
  // Gives up on the stream (the writers outlived the drain deadline): flushes and closes.
  void close_stream(ConsoleWriter& console);

 private:
  void write_log(const char* data, std::size_t size);
  void to_console(ConsoleWriter& console, std::string_view line);

  Fd pipe_;
  Fd log_;
  std::string log_path_;
  bool is_stderr_;
  bool to_console_;
  std::string prefix_;
  LineSplitter splitter_;
  ProgressLogFilter log_filter_;
  bool shows_status_ = false;  // this stream's bar is the console's status line
};

}  // namespace mgtrain
