// The one output helper for mgtrain's own messages. Every message is one whole line, "mgtrain: <text>",
// "mgtrain: note: <text>", "mgtrain: warning: <text>" or "mgtrain: error: <text>", written with one write(2)
// so lines from several processes never interleave. info/note/warn/error go to the message stream (stderr,
// or the descriptor a launch was given: ScopedOutput); progress goes to the output stream (stdout), for the
// worker's report lines that belong with its output. stdio's buffers are flushed first, so these lines
// keep their order with anything printed through stdio.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace mgtrain::log {

// Writes all of `text` to `fd` (retrying on EINTR and short writes); gives up silently when the descriptor
// fails (EPIPE, closed), as console output must never stop the program.
void write_all(int fd, std::string_view text);

enum class Level { Info, Note, Warning, Error, Progress };

// Writes "mgtrain: [note: |warning: |error: ]<text>\n" to the stream the level goes to.
void line(Level level, std::string_view text);
// That line as text, for a writer that queues it among other output (the launcher's ConsoleWriter).
std::string format_line(Level level, std::string_view text);
// Writes `text` exactly as it is (a multi-line report, a table) to the message stream.
void text(std::string_view text);

template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  line(Level::Info, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void note(fmt::format_string<Args...> format, Args&&... args) {
  line(Level::Note, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  line(Level::Warning, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  line(Level::Error, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void progress(fmt::format_string<Args...> format, Args&&... args) {
  line(Level::Progress, fmt::format(format, std::forward<Args>(args)...));
}

// The top of a binary, the one place its errors are caught: main() returns run_main("mgtrain", [&] { ... }).
// Returns what `body` returns; an Error prints "<program>: error: <message>" to stderr and gives its exit code,
// any other exception prints "<program>: internal error: <what>" and gives exit_code::kFailure.
int run_main(std::string_view program, const std::function<int()>& body);

// While alive, the message and output streams are these descriptors (a launch given a test's pipes).
class ScopedOutput {
 public:
  ScopedOutput(int output_fd, int message_fd);
  ~ScopedOutput();
  ScopedOutput(const ScopedOutput&) = delete;
  ScopedOutput& operator=(const ScopedOutput&) = delete;

 private:
  int previous_output_;
  int previous_message_;
};

}  // namespace mgtrain::log
