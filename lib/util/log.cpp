// mgtrain's own messages (see log.hpp).
#include "util/log.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string>

#include <unistd.h>

#include "util/error.hpp"

namespace mgtrain::log {
namespace {

std::atomic<int> output_fd{1};
std::atomic<int> message_fd{2};

std::string_view prefix(Level level) {
  switch (level) {
    case Level::Note:
      return "mgtrain: note: ";
    case Level::Warning:
      return "mgtrain: warning: ";
    case Level::Error:
      return "mgtrain: error: ";
    case Level::Info:
    case Level::Progress:
      break;
  }
  return "mgtrain: ";
}

void flush_stdio() {
  std::fflush(stdout);
  std::fflush(stderr);
}

}  // namespace

void write_all(int fd, std::string_view text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t written = ::write(fd, text.data() + done, text.size() - done);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    done += static_cast<std::size_t>(written);
  }
}

std::string format_line(Level level, std::string_view text) {
  std::string whole(prefix(level));
  whole.append(text);
  if (whole.back() != '\n') whole += '\n';
  return whole;
}

void line(Level level, std::string_view text) {
  const std::string whole = format_line(level, text);
  flush_stdio();
  write_all(level == Level::Progress ? output_fd.load() : message_fd.load(), whole);
}

void text(std::string_view text) {
  flush_stdio();
  write_all(message_fd.load(), text);
}

namespace {

void fatal(std::string_view program, std::string_view text, bool internal = false) {
  flush_stdio();
  write_all(2, fmt::format("{}: {}error: {}\n", program, internal ? "internal " : "", text));
}

}  // namespace

int run_main(std::string_view program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    fatal(program, e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    fatal(program, e.what(), /*internal=*/true);
    return exit_code::kFailure;
  }
}

ScopedOutput::ScopedOutput(int output, int message)
    : previous_output_(output_fd.exchange(output)), previous_message_(message_fd.exchange(message)) {}

ScopedOutput::~ScopedOutput() {
  output_fd.store(previous_output_);
  message_fd.store(previous_message_);
}

}  // namespace mgtrain::log
