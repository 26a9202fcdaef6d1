// Hang detection, free of I/O: each local rank's last progress (time and step, from its progress file), when a
// rank counts as hung, and which rank is the root cause when several stop (decide_hang). The rule: the hung rank
// is the one whose progress stopped first, not the first one noticed; ranks that stopped later are waiting for
// it (typically in a collective). The supervision policy owns one HangWatch; unit tests drive it with made-up
// times (tests/supervise/test_hang_watch.cpp). docs/diagnosis.md explains it to users.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mgtrain {

using SteadyTime = std::chrono::steady_clock::time_point;

// What is known of one local rank's progress.
struct RankProgress {
  int local_rank = 0;
  bool running = false;
  bool reported = false;  // its progress file changed at least once this attempt; until then it is not judged
  SteadyTime last_progress{};
  std::optional<std::int64_t> last_step;  // nullopt: the file is only touched
  bool stopped = false;  // evidence asked at a verdict: the process is stopped (SIGSTOP, a debugger's stop)
};

// One rank in a verdict.
struct HangRank {
  int local_rank = 0;
  double silent_s = 0;  // seconds without progress at the verdict
  SteadyTime last_progress{};
  std::optional<std::int64_t> last_step;
  bool stopped = false;
};

struct HangVerdict {
  // The root cause: the rank whose progress stopped first (several only when several processes are stopped).
  std::vector<HangRank> hung;
  // Ranks that stopped too, later: presumably waiting for the hung one. Ordered by last progress.
  std::vector<HangRank> waiting;
  // Local ranks among `waiting` that progress alone cannot tell from the hung one: the same step (or no steps),
  // stopped within kTieWindowS of it. The stacks show which one waits.
  std::vector<int> tied;
};

// A rank silent for this fraction of the timeout when a hang is due counts as stopped (hung or waiting); one that
// reported more recently goes on and is left out of the verdict.
inline constexpr double kStalledFraction = 0.5;
// Writers limit how often they report (the trainer every 200 ms, the Python helper every second): last reports
// closer than this do not say which rank stopped first, the step decides between them.
inline constexpr double kTieWindowS = 1.0;

// The root-cause rule. nullopt while no running rank that reported has been silent for `timeout_s`. Among the
// stalled ranks (silent for kStalledFraction x timeout_s): the stopped processes are hung, when there are any;
// otherwise the rank with the earliest last progress, and among ranks whose last progress lies within kTieWindowS
// of the earliest the one with the lowest step (when all of them report steps).
std::optional<HangVerdict> decide_hang(const std::vector<RankProgress>& ranks, SteadyTime now, double timeout_s);

// The stacks' word on a hang (docs/diagnosis.md), for a node and for the job's verdict across nodes: ranks in
// lock-step (DDP) stop at the same step, so progress cannot tell the one stuck elsewhere from the ones waiting for it
// in the next collective; their stacks can. Given each stalled rank's top frames (diagnose/top_frames.hpp, its main
// thread first), the index of the one rank outside any collective when every other one waits in one; nullopt when
// that is not so, or when a rank has no frames.
std::optional<std::size_t> settled_by_stacks(const std::vector<std::vector<std::string>>& top_frames);

// "rank 3", "ranks 0-2, 5" (sorted, runs of 3 or more as ranges).
std::string rank_list(std::vector<int> ranks);

// The line printed when a hang is found, e.g. "rank 1 hung: no progress for 10 s (last step 41 at 12:00:03.2Z);
// rank 0 waiting since 12:00:03.4Z". `global_rank` maps local ranks, `clock` formats a time.
std::string describe_hang(const HangVerdict& verdict, const std::function<int(int)>& global_rank,
                          const std::function<std::string(SteadyTime)>& clock);

class HangWatch {
 public:
  // `timeout_s` 0: off (nothing is ever due).
  HangWatch(int nproc, double timeout_s);

  double timeout_s() const { return timeout_s_; }
  // A new attempt's workers run from `now`: their progress is forgotten.
  void start_attempt(SteadyTime now);
  // The rank's progress file changed at `when` (the file's time, possibly before now) reporting `step`.
  void on_progress(int local_rank, SteadyTime when, std::optional<std::int64_t> step);
  // The rank's process ended: not judged any more.
  void on_exit(int local_rank);
  // Running ranks that have reported nothing timeout_s after their attempt began: each is returned once in the
  // watch's life, to be told that hang detection waits for its first report.
  std::vector<int> take_unreported(SteadyTime now);
  // decide_hang over the ranks; `stopped(local_rank)` is asked only when a hang is due.
  std::optional<HangVerdict> check(SteadyTime now, const std::function<bool(int)>& stopped) const;
  // Another node found a hang (multi-node): every running rank that reported, as waiting, by last progress (the
  // job's verdict is made across nodes, multinode/hang_across_nodes.hpp); `stopped` as for check.
  HangVerdict all_waiting(SteadyTime now, const std::function<bool(int)>& stopped) const;
  // When check or take_unreported must run next; nullopt: off, or nothing to watch.
  std::optional<SteadyTime> next_deadline() const;
  const RankProgress& rank(int local_rank) const { return ranks_.at(local_rank); }

 private:
  double timeout_s_;
  std::vector<RankProgress> ranks_;
  std::vector<bool> announced_;  // take_unreported returned it
  SteadyTime attempt_start_{};
};

}  // namespace mgtrain
