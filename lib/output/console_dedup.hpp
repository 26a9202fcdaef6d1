// Console deduplication (launch.console_dedup, docs/launch.md#console-deduplication): a whole line that several
// ranks print identically within a short window reaches the console once, as "[ranks 0-3] text" (ranges compressed:
// "[ranks 0-7,9]"), instead of once per rank. Lines are held up to the window, or until every rank on the console
// has printed it, and leave in the order they first came, so each rank's lines keep their order; a line that one
// rank printed leaves as it came, behind that rank's prefix. The rank logs keep every copy (the log files are written
// before the console). Pure: the caller gives the time and writes what is released (ConsoleWriter).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mgtrain {

class ConsoleDedup {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kWindow = std::chrono::milliseconds(200);
  // What is held is bounded: past these, the oldest lines leave early.
  static constexpr std::size_t kMaxHeldLines = 4096;
  static constexpr std::size_t kMaxHeldBytes = 4 << 20;

  struct Released {
    bool to_stderr = false;
    std::string prefix;  // the one rank's own prefix, or "[ranks 0-3] "
    std::string text;    // the line without its '\n'
  };

  // `ranks_on_console`: how many ranks print to the console; a line all of them printed leaves at once.
  ConsoleDedup(int ranks_on_console, Clock::duration window = kWindow);

  // A whole line of `rank`'s stream (its console prefix given).
  void add(bool to_stderr, int rank, std::string_view prefix, std::string_view text, Clock::time_point now,
           std::vector<Released>& out);
  // The lines whose window has passed (or that every rank printed), in order.
  void release_due(Clock::time_point now, std::vector<Released>& out);
  // Everything held, in order (before other output, and at the end).
  void release_all(std::vector<Released>& out);
  // When the oldest held line is due; none when nothing is held.
  std::optional<Clock::time_point> deadline() const;
  bool empty() const { return groups_.empty(); }

 private:
  struct Group {
    bool to_stderr = false;
    std::string text;
    std::string first_prefix;  // the prefix of the rank that printed it first
    std::vector<int> ranks;
    Clock::time_point due;
    bool complete = false;
  };
  static std::string key_of(bool to_stderr, std::string_view text);
  void release_front(std::vector<Released>& out);

  int ranks_on_console_;
  Clock::duration window_;
  std::deque<Group> groups_;
  std::uint64_t front_id_ = 0;  // the id of groups_.front(); ids grow by one per group
  std::unordered_map<std::string, std::vector<std::uint64_t>> open_;  // held groups per stream and text, oldest first
  std::size_t held_bytes_ = 0;
};

}  // namespace mgtrain
