// Buffered, line-atomic console output of the launcher.
#include "output/console_writer.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>

#include "util/fd.hpp"

namespace mgtrain {
namespace {

// Whether two descriptors lead to the same place (one terminal, one pipe or one file).
bool same_destination(int a, int b) {
  struct stat first {
  }, second{};
  if (fstat(a, &first) != 0 || fstat(b, &second) != 0) return false;
  if (S_ISCHR(first.st_mode) && S_ISCHR(second.st_mode)) return first.st_rdev == second.st_rdev;
  return first.st_dev == second.st_dev && first.st_ino == second.st_ino;
}

}  // namespace

ConsoleWriter::ConsoleWriter(int stdout_fd, int stderr_fd)
    : out_{stdout_fd, {}, false, {}}, err_{stderr_fd, {}, false, {}}, shared_(same_destination(stdout_fd, stderr_fd)) {}

ConsoleWriter::~ConsoleWriter() {
  release_held();
  finish_status();
  end_open_lines(out_);
  end_open_lines(err_);
  flush();
}

void ConsoleWriter::end_open_line(Stream& stream, Stream& target) {
  if (stream.open.owner == nullptr) return;
  stream.open = OpenLine{};
  if (stream.broken) return;
  stream.pending += '\n';
  if (&stream != &target) flush_stream(stream);  // keep the order on the shared destination
}

void ConsoleWriter::end_open_lines(Stream& target) {
  end_open_line(target, target);
  if (shared_) end_open_line(&target == &out_ ? err_ : out_, target);
}

void ConsoleWriter::add_piece(bool to_stderr, const void* owner, std::string_view prefix, std::string_view text,
                              bool ends_line) {
  release_held();
  Stream& stream = to_stderr ? err_ : out_;
  if (stream.open.owner != owner) {
    end_open_line(stream, stream);
    stream.open = OpenLine{owner, true, false};
  }
  if (shared_) end_open_line(to_stderr ? out_ : err_, stream);
  OpenLine& open = stream.open;
  if (!stream.broken) {
    for (char c : text) {
      if (c == '\r') {
        if (!open.at_start) stream.pending += '\r';
        open.at_start = true;
        continue;
      }
      if (open.at_start) {
        stream.pending.append(prefix);
        open.at_start = false;
        open.wrote_any = true;
      }
      stream.pending += c;
    }
    if (ends_line) {
      if (!open.wrote_any) stream.pending.append(prefix);  // an empty line still shows whose it is
      stream.pending += '\n';
    }
  }
  if (ends_line) open = OpenLine{};
  if (stream.pending.size() >= kFlushThreshold) flush_stream(stream);
}

void ConsoleWriter::add_rank_line(bool to_stderr, const void* owner, int rank, std::string_view prefix,
                                  std::string_view text) {
  const Stream& stream = to_stderr ? err_ : out_;
  if (!dedup_ || rank < 0 || stream.open.owner == owner) return add_piece(to_stderr, owner, prefix, text, true);
  dedup_->add(to_stderr, rank, prefix, text, std::chrono::steady_clock::now(), released_);
  write_released();
}

void ConsoleWriter::set_dedup(std::optional<int> ranks_on_console) {
  release_held();
  dedup_ = ranks_on_console ? std::make_unique<ConsoleDedup>(*ranks_on_console) : nullptr;
}

std::optional<std::chrono::steady_clock::time_point> ConsoleWriter::held_deadline() const {
  return dedup_ ? dedup_->deadline() : std::nullopt;
}

void ConsoleWriter::release_due(std::chrono::steady_clock::time_point now) {
  if (!dedup_) return;
  dedup_->release_due(now, released_);
  write_released();
}

void ConsoleWriter::release_held() {
  if (!dedup_ || dedup_->empty()) return;
  dedup_->release_all(released_);
  write_released();
}

void ConsoleWriter::write_released() {
  for (const ConsoleDedup::Released& line : released_) add_line(line.to_stderr, line.prefix, line.text);
  released_.clear();
}

void ConsoleWriter::add_line(bool to_stderr, std::string_view prefix, std::string_view line) {
  Stream& stream = to_stderr ? err_ : out_;
  end_open_lines(stream);
  if (stream.broken) return;
  stream.pending.append(prefix);
  stream.pending.append(line);
  stream.pending += '\n';
  if (stream.pending.size() >= kFlushThreshold) flush_stream(stream);
}

void ConsoleWriter::add_text(bool to_stderr, std::string_view text) {
  release_held();
  Stream& stream = to_stderr ? err_ : out_;
  end_open_lines(stream);
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
  // The status line waits while a worker's line is shown in part: the cursor is on that line.
  if (!status_.empty() && (!status_on_screen_ || status_changed_) && !out_.broken && !open_line_on_stdout()) {
    std::string text = status_;
    const int columns = stdout_terminal_columns();
    if (columns > 1 && text.size() >= static_cast<std::size_t>(columns))
      text.resize(static_cast<std::size_t>(columns - 1));
    out_.pending = "\r" + text + "\x1b[K";
    flush_stream(out_);
    status_on_screen_ = true;
    status_changed_ = false;
  }
}

void ConsoleWriter::set_status(std::string_view prefix, std::string_view text) {
  release_held();
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

winsize ConsoleWriter::terminal_size() const {
  for (int fd : {out_.fd, err_.fd}) {
    winsize size{};
    if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 && size.ws_row > 0) return size;
  }
  return winsize{24, 80, 0, 0};
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
      wait_ready(&wait_writable, 1, std::nullopt, "for the console to take output");
    } else {
      stream.broken = true;  // EPIPE, EBADF, ...: nobody reads the console any more
    }
  }
  stream.pending.clear();
}

}  // namespace mgtrain
