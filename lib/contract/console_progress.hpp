// How rank 0's live progress bar travels through the launcher. A worker's stdout is a pipe, so it cannot
// redraw a terminal line itself; instead, when the launcher tells it that its stdout reaches a terminal
// (MGTRAIN_CONSOLE_IS_TTY=1, MGTRAIN_CONSOLE_COLUMNS), it writes marked lines:
//   "\x1emgtrain:bar <text>"  the bar's new state: the launcher redraws its live bottom line in place
//   "\x1emgtrain:bar-end"      the bar is done: the launcher keeps its last state as an ordinary line
//   "\x1emgtrain:log <text>"   a line for the log file only (the plain progress lines the bar replaces)
// The rank's log file gets none of the bar lines and the log-only lines without their marker, so
// rank_0/stdout.log reads as if the output had not been a terminal. (0x1E, the ASCII record separator,
// starts no line a program normally prints.)
#pragma once

#include <string>
#include <string_view>

namespace mgtrain {

inline constexpr const char* kConsoleIsTtyVariable = "MGTRAIN_CONSOLE_IS_TTY";
inline constexpr const char* kConsoleColumnsVariable = "MGTRAIN_CONSOLE_COLUMNS";

inline constexpr std::string_view kBarMarker = "\x1emgtrain:bar ";
inline constexpr std::string_view kBarEndMarker = "\x1emgtrain:bar-end";
inline constexpr std::string_view kLogOnlyMarker = "\x1emgtrain:log ";

// What a whole line (without '\n') from a worker means for the console.
enum class ConsoleLineKind { Ordinary, Bar, BarEnd, LogOnly };
struct ConsoleLine {
  ConsoleLineKind kind = ConsoleLineKind::Ordinary;
  std::string_view text;  // without the marker
};
ConsoleLine classify_console_line(std::string_view line);

// Turns the bytes of a worker's stream into the bytes of its log file: drops bar lines, strips the
// log-only marker, copies everything else byte for byte (partial lines included, as they arrive).
class ProgressLogFilter {
 public:
  // The log bytes for `data` (a line's start that may still become a marker is held back until it is decided).
  std::string feed(std::string_view data);
  // At end of stream: whatever was held back.
  std::string finish();

 private:
  enum class Mode { LineStart, Copy, Drop };
  Mode mode_ = Mode::LineStart;
  std::string held_;
};

}  // namespace mgtrain
