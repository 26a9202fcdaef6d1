// Marked progress lines: classification for the console, filtering for the log (see console_progress.hpp).
#include "contract/console_progress.hpp"

#include "util/strings.hpp"

namespace mgtrain {

ConsoleLine classify_console_line(std::string_view line) {
  if (line.empty() || line[0] != '\x1e') return {ConsoleLineKind::Ordinary, line};
  if (starts_with(line, kBarMarker)) return {ConsoleLineKind::Bar, line.substr(kBarMarker.size())};
  if (line == kBarEndMarker) return {ConsoleLineKind::BarEnd, {}};
  if (starts_with(line, kLogOnlyMarker)) return {ConsoleLineKind::LogOnly, line.substr(kLogOnlyMarker.size())};
  return {ConsoleLineKind::Ordinary, line};
}

std::string ProgressLogFilter::feed(std::string_view data) {
  std::string out;
  out.reserve(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) {
    const char c = data[i];
    switch (mode_) {
      case Mode::Copy: {
        // Copy up to and including the next newline in one go.
        const std::size_t newline = data.find('\n', i);
        const std::size_t end = newline == std::string_view::npos ? data.size() : newline + 1;
        out.append(data.substr(i, end - i));
        i = end - 1;
        if (newline != std::string_view::npos) mode_ = Mode::LineStart;
        break;
      }
      case Mode::Drop:
        if (c == '\n') mode_ = Mode::LineStart;
        break;
      case Mode::LineStart: {
        held_ += c;
        const std::string_view held = held_;
        if (held == kBarMarker || held == kBarEndMarker) {
          held_.clear();
          mode_ = Mode::Drop;  // "bar-end" is followed by its newline, "bar " by the text: both dropped
        } else if (held == kLogOnlyMarker) {
          held_.clear();
          mode_ = Mode::Copy;
        } else if (!starts_with(kBarMarker, held) && !starts_with(kBarEndMarker, held) &&
                   !starts_with(kLogOnlyMarker, held)) {
          out += held_;
          held_.clear();
          mode_ = c == '\n' ? Mode::LineStart : Mode::Copy;
        }
        break;
      }
    }
  }
  return out;
}

std::string ProgressLogFilter::finish() {
  std::string rest;
  rest.swap(held_);
  mode_ = Mode::LineStart;
  return rest;
}

}  // namespace mgtrain
