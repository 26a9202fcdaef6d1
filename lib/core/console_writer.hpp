// The launcher's console: collects whole prefixed lines for its stdout and stderr and writes
// them in large blocks. A closed console (EPIPE, e.g. `| head`) silences it without stopping the job.
#pragma once

#include <string>
#include <string_view>

namespace mgtrain {

// Writes all of `text` to `fd` (retrying on EINTR and short writes) for the launcher's own messages;
// gives up silently when the descriptor fails, as console output must never stop the launcher.
void write_to_fd(int fd, const std::string& text);

class ConsoleWriter {
 public:
  ConsoleWriter(int stdout_fd = 1, int stderr_fd = 2) : out_{stdout_fd, {}, false}, err_{stderr_fd, {}, false} {}
  ~ConsoleWriter() { flush(); }

  // Queues "<prefix><line>\n".
  void add_line(bool to_stderr, std::string_view prefix, std::string_view line);
  // Queues text as it is (the launcher's own messages).
  void add_text(bool to_stderr, std::string_view text);
  void flush();

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
};

}  // namespace mgtrain
