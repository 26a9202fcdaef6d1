// Straggler detection from progress alone (docs/diagnosis.md#stragglers, docs/diagnosis.md): a pure decision
// object fed with each rank's step count as the launcher reads it from the rank's progress file (steady time), no
// collective and nothing in the training step. Each rank's step rate is measured over a sliding window; a rank whose
// rate stays below (1 - margin) x the median rate of the other ranks for half a window is flagged, and the flag clears
// (hysteresis) once its rate has been at least (1 - margin/2) x that median for half a window. Ranks without progress
// yet, each rank's first two advances (start-up, the first step's compilation and warm-up) and ranks measured for less
// than half a window are not judged; at least two ranks with a rate are needed. A step count that goes back (a
// restarted worker) starts that rank over.
// Ranks in lock-step (DDP: every rank waits for the slowest in each all-reduce) have equal step rates, so the rate
// cannot name the slow one. When every judged rank also reports its busy seconds (its time outside waits for the
// other ranks, from the progress line's "wait"), the rule compares own-work speeds instead: 1 / (busy seconds per
// step) over the same window, same margin and hysteresis; a rank doing 30 % more own work per step is flagged even
// though its step rate equals everyone's. With one rank not reporting busy time, step rates are compared.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mgtrain {

struct StragglerSettings {
  double margin = 0.2;     // launch.straggler_margin: flagged when slower than (1 - margin) x the median
  double window_s = 30.0;  // launch.straggler_window: rates over this many seconds; sustained for half of it
};

// What the ranks were compared by.
enum class StragglerBasis {
  kStepRate,  // steps/s
  kBusyTime,  // seconds of own work per step (every judged rank reports its wait)
};

// One period in which a rank was flagged.
struct StragglerEpisode {
  int rank = 0;
  StragglerBasis basis = StragglerBasis::kStepRate;  // when it was flagged
  std::chrono::steady_clock::time_point start;
  std::optional<std::chrono::steady_clock::time_point> end;  // nullopt while it lasts
  double step_rate = 0;                                      // the rank's steps/s when it was flagged
  double median_step_rate = 0;                               // the other ranks' median then
  double lowest_step_rate = 0;                               // the rank's lowest rate during the episode
  // kBusyTime: the rank's own-work seconds per step when flagged, the other ranks' median then, its highest since.
  double busy_per_step = 0;
  double median_busy_per_step = 0;
  double highest_busy_per_step = 0;
};

// A flag raised or cleared by evaluate().
struct StragglerChange {
  enum class Kind {
    kFlagged,    // the rank is a straggler now
    kRecovered,  // its rate came back near the median
    kLeft,       // it exited or started over (forget(), restart(), its step count went back)
    kAlone,      // no other rank with a rate to compare it with any more
  };
  int rank = 0;
  Kind kind = Kind::kFlagged;
  StragglerBasis basis = StragglerBasis::kStepRate;  // kFlagged, kRecovered: what was compared
  double step_rate = 0;                              // kFlagged, kRecovered: the rank's steps/s
  double median_step_rate = 0;                       // kFlagged, kRecovered: the other ranks' median
  double busy_per_step = 0;                          // kBusyTime: the rank's own-work seconds per step
  double median_busy_per_step = 0;                   // kBusyTime: the other ranks' median
  double seconds = 0;  // kFlagged: the window the rate was measured over; else the episode's length
  bool flagged() const { return kind == Kind::kFlagged; }
};

class StragglerDetector {
 public:
  using Clock = std::chrono::steady_clock;

  // Throws UsageError when margin is not in (0, 1) or the window is not positive.
  explicit StragglerDetector(StragglerSettings settings);

  // The rank's step count as read (call at every reading, unchanged or not), `when` it was reached as well as
  // known: the progress file's modification time, at the latest the reading's time. Times of a rank that go
  // back are taken as its latest one. `busy`: the rank's own-work seconds up to that step, from any origin fixed
  // for the rank (ProgressReport::busy), when it reports them.
  void observe(int rank, Clock::time_point when, std::int64_t step, std::optional<double> busy = std::nullopt);
  // The rank has no progress any more (exited, its file gone): not judged; its open episode ends.
  void forget(int rank, Clock::time_point now);
  // Every rank starts over (a new attempt of the worker group); open episodes end.
  void restart(Clock::time_point now);
  // Measures every rank's rate at `now`, judges them, and returns the flags raised or cleared now.
  std::vector<StragglerChange> evaluate(Clock::time_point now);

  // As of the last evaluate(): the rank's steps/s (nullopt while not measured) and whether it is flagged.
  std::optional<double> step_rate(int rank) const;
  // As of the last evaluate(): the rank's own-work seconds per step over the window (nullopt: not reported).
  std::optional<double> busy_per_step(int rank) const;
  bool flagged(int rank) const;
  const std::vector<StragglerEpisode>& episodes() const { return episodes_; }
  const StragglerSettings& settings() const { return settings_; }

 private:
  struct Point {
    Clock::time_point time;
    std::int64_t step;
    std::optional<double> busy;
  };
  struct Track {
    std::optional<std::int64_t> last_step;  // nullopt: no reading yet
    int advances = 0;                       // step changes seen (the first ones are warm-up)
    std::optional<Clock::time_point> measured_since;
    std::deque<Point> points;  // advances after warm-up, the newest one at or before the window's start kept
    std::optional<double> rate;
    std::optional<double> busy_per_step;
    std::optional<Clock::time_point> slow_since;       // the flag's condition has held since
    std::optional<Clock::time_point> recovered_since;  // flagged, and the clearing condition has held since
    std::optional<std::size_t> episode;                // index into episodes_ while flagged
  };
  void measure(Track& track, Clock::time_point now) const;  // sets rate and busy_per_step
  void end_episode(int rank, Track& track, Clock::time_point now, StragglerChange::Kind why,
                   std::vector<StragglerChange>* changes);

  StragglerSettings settings_;
  Clock::duration window_;
  Clock::duration sustain_;
  std::map<int, Track> tracks_;
  std::vector<StragglerChange> pending_;  // clears from forget()/restart(), returned by the next evaluate()
  std::vector<StragglerEpisode> episodes_;
};

// "rank 2 is a straggler: 0.71 steps/s against a median of 1.02 (30 % slower) over the last 30 s"; a cleared
// flag: "rank 2 is no longer a straggler: 1.01 steps/s against a median of 1.02 (flagged for 41 s)", or why
// it is no longer judged. Compared by busy time: "rank 2 is a straggler: 0.131 s of own work per step against a
// median of 0.100 s (31 % more; steps/s equal in lock-step: 7.02 against 7.03) over the last 30 s".
std::string straggler_message(const StragglerChange& change);

}  // namespace mgtrain
