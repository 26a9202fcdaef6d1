// Live line splitting for the console: whole lines when they come quickly, partial ones after a short hold.
#include "output/live_line_splitter.hpp"

namespace mgtrain {

LiveLineSplitter::LiveLineSplitter(Clock::duration hold, std::size_t max_line_bytes)
    : hold_(hold), max_line_bytes_(max_line_bytes == 0 ? 1 : max_line_bytes) {}

void LiveLineSplitter::deliver_held(const PieceSink& sink, bool ends_line) {
  sink(Piece{held_, ends_line, ends_line && !started_});
  held_.clear();
  started_ = !ends_line;
  due_.reset();
}

void LiveLineSplitter::feed(std::string_view data, Clock::time_point now, const PieceSink& sink) {
  while (!data.empty()) {
    const std::size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      held_.append(data);
      break;
    }
    held_.append(data.substr(0, newline));
    if (marked_line()) {  // cut like the whole-line splitter does, each piece a line of its own
      while (held_.size() > max_line_bytes_) {
        sink(Piece{std::string_view(held_).substr(0, max_line_bytes_), true, true});
        held_.erase(0, max_line_bytes_);
      }
    }
    deliver_held(sink, true);
    data.remove_prefix(newline + 1);
  }
  settle_partial(now, sink);
}

void LiveLineSplitter::settle_partial(Clock::time_point now, const PieceSink& sink) {
  if (held_.empty()) return;
  if (marked_line()) {
    while (held_.size() > max_line_bytes_) {
      sink(Piece{std::string_view(held_).substr(0, max_line_bytes_), true, true});
      held_.erase(0, max_line_bytes_);
    }
    return;  // no deadline: it is delivered when it ends
  }
  if (held_.size() >= max_line_bytes_) {
    deliver_held(sink, false);
    return;
  }
  const std::size_t carriage = held_.rfind('\r');
  if (carriage != std::string::npos) {  // finished updates go out now, the text after them waits
    const std::string rest = held_.substr(carriage + 1);
    held_.resize(carriage + 1);
    deliver_held(sink, false);
    held_ = rest;
  }
  if (!held_.empty() && !due_) due_ = now + hold_;
}

void LiveLineSplitter::on_time(Clock::time_point now, const PieceSink& sink) {
  if (!due_ || now < *due_) return;
  if (held_.empty() || marked_line()) {
    due_.reset();
    return;
  }
  deliver_held(sink, false);
}

void LiveLineSplitter::finish(const PieceSink& sink) {
  if (held_.empty() && !started_) return;
  deliver_held(sink, true);
  started_ = false;
}

}  // namespace mgtrain
