// What a worker's log file gets from its stream: whole lines, each in its final state. A '\r' followed by
// more text starts the line over (a progress bar's updates collapse to the last one; "\r\n" is a plain line
// end); for a terminal's stream (launch.tty) escape sequences (colours, cursor moves, titles) and BEL are
// dropped as well. An unfinished line is held until its end, or written as it is when the stream ends or
// it grows beyond `max_line_bytes` (memory stays bounded for a writer that never ends its line).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mgtrain {

class LogLineCleaner {
 public:
  explicit LogLineCleaner(bool strip_escapes, std::size_t max_line_bytes = kDefaultMaxLineBytes)
      : strip_escapes_(strip_escapes), max_line_bytes_(max_line_bytes == 0 ? 1 : max_line_bytes) {}

  // The bytes for the file that `data` completes (whole lines, or over-long pieces).
  std::string feed(std::string_view data);
  // At the end of the stream: the unfinished line, if any (without a newline: the file shows it was cut).
  std::string finish();

  static constexpr std::size_t kDefaultMaxLineBytes = 64 * 1024;

 private:
  enum class Escape { None, Start, Csi, Osc, OscEsc, Intermediate };
  // Whether `c` is part of an escape sequence (and advances its state).
  bool in_escape(char c);

  bool strip_escapes_;
  std::size_t max_line_bytes_;
  Escape escape_ = Escape::None;
  std::string line_;       // the current line's text since its last '\r'
  bool carriage_ = false;  // a '\r' ended the text so far: more text replaces it
};

}  // namespace mgtrain
