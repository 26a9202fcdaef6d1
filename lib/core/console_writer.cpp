// Buffered, line-atomic console output of the launcher.
#include "core/console_writer.hpp"

#include <cerrno>
#include <poll.h>
#include <unistd.h>

namespace mgtrain {

void write_to_fd(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t written = write(fd, text.data() + done, text.size() - done);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    done += static_cast<std::size_t>(written);
  }
}

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
  flush_stream(out_);
  flush_stream(err_);
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
