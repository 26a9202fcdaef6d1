// Cuts a worker's stream into pieces for the console, live: whole lines as they complete, and the unfinished
// rest of a line too, so progress output without a newline ('\r' updates, prompts) is not held back.
// - Text up to a line's last '\r' is a finished update: it is delivered at once.
// - Text after it waits `hold` (50 ms) for its newline, so that lines written in several chunks still reach
//   the console whole (lines of different ranks never tear) while a partial line is seen within `hold`.
// - A line starting with 0x1E (the trainer's marked progress lines, console_progress.hpp) is only ever
//   delivered whole.
// - Memory stays bounded: a marked line beyond `max_line_bytes` is cut into whole pieces, other text is
//   delivered as soon as that much is waiting.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mgtrain {

class LiveLineSplitter {
 public:
  using Clock = std::chrono::steady_clock;
  struct Piece {
    std::string_view text;   // no '\n'; may contain '\r'
    bool ends_line = false;  // the line is complete after this piece
    bool whole = false;      // the piece is the entire line (nothing of it was delivered before)
  };
  using PieceSink = std::function<void(const Piece& piece)>;

  explicit LiveLineSplitter(Clock::duration hold = kDefaultHold, std::size_t max_line_bytes = kDefaultMaxLineBytes);

  void feed(std::string_view data, Clock::time_point now, const PieceSink& sink);
  // When the held rest of a line is due: delivers it.
  void on_time(Clock::time_point now, const PieceSink& sink);
  // When on_time has something to deliver; nullopt when nothing is held (or only a marked line).
  std::optional<Clock::time_point> deadline() const { return due_; }
  // At the end of the stream: the rest of the current line, ended.
  void finish(const PieceSink& sink);

  static constexpr Clock::duration kDefaultHold = std::chrono::milliseconds(50);
  static constexpr std::size_t kDefaultMaxLineBytes = 64 * 1024;

 private:
  bool marked_line() const { return !started_ && !held_.empty() && held_.front() == '\x1e'; }
  void deliver_held(const PieceSink& sink, bool ends_line);
  void settle_partial(Clock::time_point now, const PieceSink& sink);

  Clock::duration hold_;
  std::size_t max_line_bytes_;
  std::string held_;      // the current line's bytes not delivered yet
  bool started_ = false;  // part of the current line was delivered
  std::optional<Clock::time_point> due_;
};

}  // namespace mgtrain
