// One worker stream (stdout or stderr, a pipe or a pseudo-terminal): writes the rank's log file (whole lines
// in their final state, log_line_cleaner.hpp) and, when routed to the console, shows the stream live behind
// its prefix (live_line_splitter.hpp). Rank 0's marked progress lines (console_progress.hpp) become the
// console's live status line and stay out of the log file. With torchrun's --duplicate-*-filters the log file's
// lines that match are also copied, behind the prefix, to the attempt's filtered file (duplicate_filter.hpp).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "contract/console_progress.hpp"
#include "output/console_writer.hpp"
#include "output/duplicate_filter.hpp"
#include "output/live_line_splitter.hpp"
#include "output/log_line_cleaner.hpp"
#include "util/fd.hpp"

namespace mgtrain {

struct StreamCaptureSettings {
  std::string log_path;
  bool is_stderr = false;
  bool to_console = true;
  std::string prefix;     // in front of each console line, e.g. "[rank 3] " (line_prefix.hpp)
  bool terminal = false;  // the stream is a pseudo-terminal's master: escape sequences stay out of the log
  std::shared_ptr<FilteredLog> duplicate;  // null: no filters (or not for this stream)
  // The console reads the stream as torchrun's tee does (a text file in Python's universal newlines mode): '\r'
  // and "\r\n" end a line like '\n', so a progress bar's updates become lines of their own.
  bool universal_newlines = false;
  int rank = -1;  // the worker's global rank, for the console's deduplication (-1: none)
};

class StreamCapture {
 public:
  using Clock = std::chrono::steady_clock;
  // Owns `source` (non-blocking read end or pty master). Opens (truncates) the log file.
  // Throws SystemError when the log file cannot be created.
  StreamCapture(Fd source, StreamCaptureSettings settings);

  int fd() const { return source_.get(); }
  bool open() const { return source_.valid(); }
  // Reads what the stream has (one bounded read); at end of stream flushes the partial line and closes.
  void read_available(ConsoleWriter& console);
  // When a held partial line is due on the console (the loop wakes for it), and showing it.
  std::optional<Clock::time_point> console_deadline() const { return splitter_.deadline(); }
  void on_time(Clock::time_point now, ConsoleWriter& console);
  // Gives up on the stream (the writers outlived the drain deadline): flushes and closes.
  void close_stream(ConsoleWriter& console);

 private:
  // Writes cleaned whole lines to the log file (and their matches to the filtered file).
  void write_log(std::string_view bytes);
  void to_console(ConsoleWriter& console, const LiveLineSplitter::Piece& piece);

  Fd source_;
  Fd log_;
  StreamCaptureSettings settings_;
  LiveLineSplitter splitter_;
  ProgressLogFilter log_filter_;
  LogLineCleaner log_cleaner_;
  bool shows_status_ = false;           // this stream's bar is the console's status line
  bool after_carriage_return_ = false;  // universal_newlines: the last byte read was '\r'
  std::string translated_;              // universal_newlines: the chunk for the console
};

}  // namespace mgtrain
