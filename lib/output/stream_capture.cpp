// Pipe -> log file + prefixed console lines.
#include "output/stream_capture.hpp"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {
constexpr std::size_t kReadChunk = 64 * 1024;
}

StreamCapture::StreamCapture(Fd pipe, const std::string& log_path, bool is_stderr, bool to_console, int global_rank)
    : pipe_(std::move(pipe)),
      log_path_(log_path),
      is_stderr_(is_stderr),
      to_console_(to_console),
      prefix_("[rank " + std::to_string(global_rank) + "] ") {
  log_.reset(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644));
  if (!log_) throw SystemError("cannot create log file " + log_path + " (check launch.log_dir)", errno);
}

void StreamCapture::write_log(const char* data, std::size_t size) {
  while (size > 0 && log_) {
    ssize_t written = ::write(log_.get(), data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {  // disk full or similar: keep the job and the console going
      log_.reset();
      return;
    }
    data += written;
    size -= static_cast<std::size_t>(written);
  }
}

void StreamCapture::read_available(ConsoleWriter& console) {
  if (!pipe_) return;
  char buffer[kReadChunk];
  ssize_t got = ::read(pipe_.get(), buffer, sizeof buffer);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) {
    close_stream(console);
    return;
  }
  const std::string_view data(buffer, static_cast<std::size_t>(got));
  const std::string log_bytes = log_filter_.feed(data);
  write_log(log_bytes.data(), log_bytes.size());
  if (to_console_) splitter_.feed(data, [&](std::string_view line) { to_console(console, line); });
}

void StreamCapture::to_console(ConsoleWriter& console, std::string_view line) {
  const ConsoleLine kind = classify_console_line(line);
  switch (kind.kind) {
    case ConsoleLineKind::Ordinary:
      console.add_line(is_stderr_, prefix_, line);
      break;
    case ConsoleLineKind::Bar:
      console.set_status(prefix_, kind.text);
      shows_status_ = true;
      break;
    case ConsoleLineKind::BarEnd:
      if (shows_status_) console.finish_status();
      shows_status_ = false;
      break;
    case ConsoleLineKind::LogOnly:
      break;
  }
}

void StreamCapture::close_stream(ConsoleWriter& console) {
  const std::string held = log_filter_.finish();
  write_log(held.data(), held.size());
  if (to_console_) splitter_.finish([&](std::string_view line) { to_console(console, line); });
  if (shows_status_) console.finish_status();  // the worker ended without "bar-end" (a crash): keep its last state
  shows_status_ = false;
  pipe_.reset();
  log_.reset();
}

}  // namespace mgtrain
