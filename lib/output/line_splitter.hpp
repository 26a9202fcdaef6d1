// Cuts a byte stream (a worker's stdout or stderr pipe) into whole lines for the console, so
// lines of different ranks never mix. Partial lines wait for their end; over-long ones are cut.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace mgtrain {

class LineSplitter {
 public:
  using LineSink = std::function<void(std::string_view line)>;  // the line without its '\n'

  // A line longer than `max_line_bytes` is delivered in pieces of at most that size (cut on a
  // UTF-8 character boundary), so a worker printing without newlines cannot grow memory unbounded.
  explicit LineSplitter(std::size_t max_line_bytes = kDefaultMaxLineBytes);

  // Delivers every line completed by `data`; keeps the unterminated rest.
  void feed(std::string_view data, const LineSink& sink);
  // Delivers the unterminated rest, if any (at end of stream).
  void finish(const LineSink& sink);
  bool has_partial_line() const { return !pending_.empty(); }

  static constexpr std::size_t kDefaultMaxLineBytes = 64 * 1024;

 private:
  void deliver_overlong(const LineSink& sink);

  std::size_t max_line_bytes_;
  std::string pending_;
};

}  // namespace mgtrain
