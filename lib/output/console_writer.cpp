// Buffered, line-atomic console output of the launcher.
#include "output/console_writer.hpp"

#include <cerrno>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace mgtrain {

void ConsoleWriter::add_line(bool to_stderr, std::string_view prefix, std::string_view line) {
  Stream& stream = to_stderr ? err_ : out_;
  if (stream.broken) return;
  stream.pending.append(prefix);
  stream.pending.append(line);
  stream.pending += '\n';
  if (stream.pending.size() >= kFlushThreshold) flush_stream(stream);
}

void ConsoleWriter::add_text(bool to_stderr, std::string_view text) {
  Stream& stream = to_stderr ? err_ : out_;
  if (stream.broken) return;
  stream.pending.append(text);
  if (stream.pending.size() >= kFlushThreshold) flush_stream(stream);
}

void ConsoleWriter::flush() {
  const bool lines_waiting = !out_.pending.empty() || !err_.pending.empty();
  if (lines_waiting && status_on_screen_) {
    out_.pending.insert(0, "\r\x1b[K");  // clear the status line; the lines take its place
    status_on_screen_ = false;
  }
  flush_stream(out_);
  flush_stream(err_);
  if (!status_.empty() && (!status_on_screen_ || status_changed_) && !out_.broken) {
    std::string text = status_;
    const int columns = stdout_terminal_columns();
    if (columns > 1 && text.size() >= static_cast<std::size_t>(columns)) text.resize(static_cast<std::size_t>(columns - 1));
    out_.pending = "\r" + text + "\x1b[K";
    flush_stream(out_);
    status_on_screen_ = true;
    status_changed_ = false;
  }
}

void ConsoleWriter::set_status(std::string_view prefix, std::string_view text) {
  status_.assign(prefix);
  status_.append(text);
  status_changed_ = true;
}

void ConsoleWriter::finish_status() {
  if (status_.empty()) return;
  if (status_changed_ || !status_on_screen_) flush();  // the last state on screen first
  if (status_on_screen_ && !out_.broken) {
    out_.pending.insert(0, "\n");
    status_on_screen_ = false;
  }
  status_.clear();
  flush();
}

int ConsoleWriter::stdout_terminal_columns() const {
  if (!isatty(out_.fd)) return 0;
  winsize size{};
  if (ioctl(out_.fd, TIOCGWINSZ, &size) != 0 || size.ws_col == 0) return 80;
  return size.ws_col;
}

void ConsoleWriter::flush_stream(Stream& stream) {
  std::size_t done = 0;
  while (done < stream.pending.size() && !stream.broken) {
    ssize_t written = write(stream.fd, stream.pending.data() + done, stream.pending.size() - done);
    if (written > 0) {
      done += static_cast<std::size_t>(written);
    } else if (written < 0 && errno == EINTR) {
      continue;
    } else if (written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd wait_writable{stream.fd, POLLOUT, 0};  // a console someone made non-blocking
      poll(&wait_writable, 1, -1);
    } else {
      stream.broken = true;  // EPIPE, EBADF, ...: nobody reads the console any more
    }
  }
  stream.pending.clear();
}

}  // namespace mgtrain
