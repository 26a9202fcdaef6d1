// Pipe -> log file + prefixed console lines.
#include "core/stream_capture.hpp"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include "core/error.hpp"

namespace mgtrain {
namespace {
constexpr std::size_t kReadChunk = 64 * 1024;
}

StreamCapture::StreamCapture(int pipe_fd, const std::string& log_path, bool is_stderr, bool to_console, int global_rank)
    : pipe_fd_(pipe_fd),
      log_fd_(-1),
      log_path_(log_path),
      is_stderr_(is_stderr),
      to_console_(to_console),
      prefix_("[rank " + std::to_string(global_rank) + "] ") {
  log_fd_ = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
  if (log_fd_ < 0) {
    int err = errno;
    ::close(pipe_fd_);
    pipe_fd_ = -1;
    throw SystemError("cannot create log file " + log_path + " (check launch.log_dir)", err);
  }
}

StreamCapture::~StreamCapture() {
  if (pipe_fd_ >= 0) ::close(pipe_fd_);
  if (log_fd_ >= 0) ::close(log_fd_);
}

void StreamCapture::write_log(const char* data, std::size_t size) {
  while (size > 0 && log_fd_ >= 0) {
    ssize_t written = ::write(log_fd_, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {  // disk full or similar: keep the job and the console going
      ::close(log_fd_);
      log_fd_ = -1;
      return;
    }
    data += written;
    size -= static_cast<std::size_t>(written);
  }
}

void StreamCapture::read_available(ConsoleWriter& console) {
  if (pipe_fd_ < 0) return;
  char buffer[kReadChunk];
  ssize_t got = ::read(pipe_fd_, buffer, sizeof buffer);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) {
    close_stream(console);
    return;
  }
  write_log(buffer, static_cast<std::size_t>(got));
  if (to_console_) {
    splitter_.feed(std::string_view(buffer, static_cast<std::size_t>(got)),
                   [&](std::string_view line) { console.add_line(is_stderr_, prefix_, line); });
  }
}

void StreamCapture::close_stream(ConsoleWriter& console) {
  if (to_console_) splitter_.finish([&](std::string_view line) { console.add_line(is_stderr_, prefix_, line); });
  if (pipe_fd_ >= 0) ::close(pipe_fd_);
  pipe_fd_ = -1;
  if (log_fd_ >= 0) ::close(log_fd_);
  log_fd_ = -1;
}

}  // namespace mgtrain
