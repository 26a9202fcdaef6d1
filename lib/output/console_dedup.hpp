// Console deduplication (launch.console_dedup, docs/launch.md#console-deduplication): a whole line that several
// ranks print identically within a short window reaches the console once, as "[ranks 0-3] text" (ranges compressed:
// "[ranks 0-7,9]"), instead of once per rank. Lines are held up to the window, or until every rank on the console
// has printed it, and leave in the order they first came, so each rank's lines keep their order; a line that one
// rank printed leaves as it came, behind that rank's prefix. The rank logs keep every copy (the log files are written
// before the console). Pure: the caller gives the time and writes what is released (ConsoleWriter for one node's
// ranks; hosts/hosts_console.hpp for the lines of every host's agent under `--hosts`, where one copy is already a set
// of ranks, "[ranks 0-3] text" of one agent, and lines that are not deduplicated keep their place behind held ones).
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

// A set of global ranks as sorted runs, apart and not adjacent: "[ranks 0-511]" is one run whatever the job's size.
class RankSet {
 public:
  struct Run {
    int first = 0;
    int last = 0;  // >= first
    bool operator==(const Run& other) const { return first == other.first && last == other.last; }
  };

  RankSet() = default;
  explicit RankSet(int rank) : runs_{{rank, rank}} {}
  // Ranks first..last (first <= last; nothing otherwise).
  void insert(int first, int last);
  void insert(const RankSet& other);
  bool intersects(const RankSet& other) const;
  std::int64_t size() const;
  bool empty() const { return runs_.empty(); }
  const std::vector<Run>& runs() const { return runs_; }
  // "0-3,5": rank_runs' compact form (util/strings.hpp), runs of two included ("3-4").
  std::string text() const;
  bool operator==(const RankSet& other) const { return runs_ == other.runs_; }

 private:
  std::vector<Run> runs_;
};

// The rank prefix at the start of a console line, as mgtrain writes it: "[rank N] " (output/line_prefix.hpp's
// default) or ConsoleDedup's "[ranks 0-3,5] ". Strict: exactly that form (no leading zeros, the runs in canonical
// compact form, at least two ranks after "ranks", the space after "]"), every rank below `rank_limit`; anything else
// (a custom prefix template, a launcher's "mgtrain: ..." message) is no rank prefix.
struct RankPrefix {
  RankSet ranks;
  std::size_t length = 0;  // of the prefix, its space included: the text follows
};
std::optional<RankPrefix> parse_rank_prefix(std::string_view line, int rank_limit);

class ConsoleDedup {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kWindow = std::chrono::milliseconds(200);
  // What is held is bounded: past these, the oldest lines leave early.
  static constexpr std::size_t kMaxHeldLines = 4096;
  static constexpr std::size_t kMaxHeldBytes = 4 << 20;

  struct Released {
    bool to_stderr = false;
    std::string prefix;  // the one copy's own prefix, or "[ranks 0-3] " (behind the copies' origin, when one)
    std::string text;    // the line without its '\n'
  };

  // `ranks_on_console`: how many ranks print to the console; a line all of them printed leaves at once (a count no
  // set reaches, e.g. INT_MAX, when it is not known: lines then wait for their window).
  ConsoleDedup(int ranks_on_console, Clock::duration window = kWindow);

  // A whole line of `rank`'s stream (its console prefix given).
  void add(bool to_stderr, int rank, std::string_view prefix, std::string_view text, Clock::time_point now,
           std::vector<Released>& out);
  // A whole line that the ranks `ranks` printed, one copy (one line of a node agent's console: "[ranks 0-3] text"
  // there): it joins the oldest held copy of the same stream and text whose ranks it does not share. `prefix` is the
  // whole prefix it came with, shown as it is when no other copy joins it; `origin` (e.g. "[host] ", a start of
  // `prefix`) stays in front of the merged "[ranks ...] " when every copy came from that origin, and is dropped when
  // they came from several.
  void add(bool to_stderr, const RankSet& ranks, std::string_view origin, std::string_view prefix,
           std::string_view text, Clock::time_point now, std::vector<Released>& out);
  // A line that is not deduplicated (no rank's, e.g. a launcher's message) but keeps its place: it leaves at once when
  // nothing is held, else right behind what is held now.
  void add_other(bool to_stderr, std::string_view prefix, std::string_view text, Clock::time_point now,
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
    bool deduplicated = true;  // false: add_other's line, waiting for its turn
    std::string text;
    std::string first_prefix;  // the prefix of the first copy
    std::string origin;        // the first copy's origin; kept while every copy came from it
    bool one_origin = true;
    int copies = 0;
    RankSet ranks;
    Clock::time_point due;
    bool complete = false;
  };
  static std::string key_of(bool to_stderr, std::string_view text);
  std::size_t held_size(const Group& group) const;
  void hold(Group group, std::vector<Released>& out);
  void release_front(std::vector<Released>& out);

  int ranks_on_console_;
  Clock::duration window_;
  std::deque<Group> groups_;
  std::uint64_t front_id_ = 0;  // the id of groups_.front(); ids grow by one per group
  std::unordered_map<std::string, std::vector<std::uint64_t>> open_;  // held groups per stream and text, oldest first
  std::size_t held_bytes_ = 0;
};

}  // namespace mgtrain
