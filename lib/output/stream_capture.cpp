// Worker stream -> log file + prefixed, live console output.
#include "output/stream_capture.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>

#include "util/error.hpp"

namespace mgtrain {
namespace {
constexpr std::size_t kReadChunk = 64 * 1024;
}

StreamCapture::StreamCapture(Fd source, StreamCaptureSettings settings)
    : source_(std::move(source)), settings_(std::move(settings)), log_cleaner_(settings_.terminal) {
  log_.reset(::open(settings_.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644));
  if (!log_) throw SystemError("cannot create log file " + settings_.log_path + " (check launch.log_dir)", errno);
}

void StreamCapture::write_log(std::string_view bytes) {
  if (bytes.empty()) return;
  if (settings_.duplicate) settings_.duplicate->add_lines(bytes, settings_.prefix);
  if (log_ && !write_fully(log_.get(), bytes).empty()) log_.reset();  // disk full or similar: keep the job going
}

void StreamCapture::read_available(ConsoleWriter& console) {
  if (!source_) return;
  char buffer[kReadChunk];
  ssize_t got = ::read(source_.get(), buffer, sizeof buffer);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) {  // end of a pipe; EIO: every holder of the pseudo-terminal's other side closed it
    close_stream(console);
    return;
  }
  const std::string_view data(buffer, static_cast<std::size_t>(got));
  write_log(log_cleaner_.feed(log_filter_.feed(data)));
  if (!settings_.to_console) return;
  std::string_view shown = data;
  if (settings_.universal_newlines) {
    translated_.clear();
    for (char c : data) {
      if (c == '\n' && after_carriage_return_) {
        after_carriage_return_ = false;  // "\r\n": one line end
        continue;
      }
      after_carriage_return_ = c == '\r';
      translated_ += after_carriage_return_ ? '\n' : c;
    }
    shown = translated_;
  }
  splitter_.feed(shown, Clock::now(), [&](const LiveLineSplitter::Piece& piece) { to_console(console, piece); });
}

void StreamCapture::on_time(Clock::time_point now, ConsoleWriter& console) {
  splitter_.on_time(now, [&](const LiveLineSplitter::Piece& piece) { to_console(console, piece); });
}

void StreamCapture::to_console(ConsoleWriter& console, const LiveLineSplitter::Piece& piece) {
  if (!piece.whole) {
    console.add_piece(settings_.is_stderr, this, settings_.prefix, piece.text, piece.ends_line);
    return;
  }
  const ConsoleLine kind = classify_console_line(piece.text);
  switch (kind.kind) {
    case ConsoleLineKind::Ordinary:
      console.add_rank_line(settings_.is_stderr, this, settings_.rank, settings_.prefix, piece.text);
      break;
    case ConsoleLineKind::Bar:
      console.set_status(settings_.prefix, kind.text);
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
  write_log(log_cleaner_.feed(log_filter_.finish()));
  write_log(log_cleaner_.finish());
  if (settings_.to_console) splitter_.finish([&](const LiveLineSplitter::Piece& piece) { to_console(console, piece); });
  if (shows_status_) console.finish_status();  // the worker ended without "bar-end" (a crash): keep its last state
  shows_status_ = false;
  source_.reset();
  log_.reset();
}

}  // namespace mgtrain
