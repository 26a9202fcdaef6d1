// Step rates, the other ranks' median and the sustained-flag rule (see straggler_detector.hpp).
#include "observe/straggler_detector.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "contract/heartbeat_line.hpp"
#include "util/error.hpp"
#include "util/timespec.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

// Advances of a rank that are warm-up: the first one ends whatever step was running at the first reading
// (often the first, slow one: compilation, cuDNN autotuning, the data loader's start), the second one ends
// a step that may still be warming up. Measuring starts at the second.
constexpr int kWarmupAdvances = 2;

double seconds(StragglerDetector::Clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

// Steps/s with two or three significant digits, never in exponent form: 0.71, 1.02, 12.5, 1234.
std::string rate_text(double rate) {
  if (rate >= 100) return fmt::format("{:.0f}", rate);
  if (rate >= 10) return fmt::format("{:.1f}", rate);
  if (rate >= 0.1) return fmt::format("{:.2f}", rate);
  return fmt::format("{:.2g}", rate);
}

// Seconds per step with three significant digits: 0.131, 1.25, 0.00412.
std::string seconds_text(double value) {
  return value >= 100 ? fmt::format("{:.0f}", value) : fmt::format("{:.3g}", value);
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

StragglerDetector::StragglerDetector(StragglerSettings settings) : settings_(settings) {
  if (!(settings.margin > 0 && settings.margin < 1)) {
    throw UsageError(fmt::format("launch.straggler_margin is {}: it must be above 0 and below 1 (0.2 = 20 % slower)",
                                 settings.margin));
  }
  if (!(settings.window_s > 0)) {
    throw UsageError(
        fmt::format("launch.straggler_window is {}: it must be a positive number of seconds", settings.window_s));
  }
  window_ = steady_seconds(settings.window_s);
  sustain_ = steady_seconds(settings.window_s / 2);
}

void StragglerDetector::observe(int rank, Clock::time_point when, std::int64_t step, std::optional<double> busy) {
  Track& track = tracks_[rank];
  if (!track.points.empty()) when = std::max(when, track.points.back().time);
  if (track.last_step && step < *track.last_step) {  // the worker started over: warm-up again
    end_episode(rank, track, when, StragglerChange::Kind::kLeft, &pending_);
    track = Track{};
  }
  if (!track.last_step) {
    track.last_step = step;
    return;
  }
  if (step == *track.last_step) return;
  track.last_step = step;
  if (++track.advances < kWarmupAdvances) return;
  if (!track.measured_since) track.measured_since = when;
  track.points.push_back(Point{when, step, busy});
}

void StragglerDetector::forget(int rank, Clock::time_point now) {
  auto found = tracks_.find(rank);
  if (found == tracks_.end()) return;
  end_episode(rank, found->second, now, StragglerChange::Kind::kLeft, &pending_);
  tracks_.erase(found);
}

void StragglerDetector::restart(Clock::time_point now) {
  for (auto& [rank, track] : tracks_) end_episode(rank, track, now, StragglerChange::Kind::kLeft, &pending_);
  tracks_.clear();
}

// Steps/s over the window: from the oldest kept advance A to the newest B, (B - A) / (tB - tA); but no more
// than (B - A + 1) / (now - tA), since the next step has not come yet: a rank that stops advancing sees its
// rate fall instead of keeping its last one. Busy seconds per step over the same advances, when both report
// them: (busyB - busyA) / (B - A). Neither until the rank has been measured for half a window.
void StragglerDetector::measure(Track& track, Clock::time_point now) const {
  track.rate.reset();
  track.busy_per_step.reset();
  if (!track.measured_since || now - *track.measured_since < sustain_) return;
  while (track.points.size() >= 2 && track.points[1].time <= now - window_) track.points.pop_front();
  const Point& first = track.points.front();
  const Point& last = track.points.back();
  const double steps = static_cast<double>(last.step - first.step);
  const double since_first = seconds(now - first.time);
  if (since_first <= 0) return;
  double rate = (steps + 1) / since_first;
  const double between = seconds(last.time - first.time);
  if (steps > 0 && between > 0) rate = std::min(rate, steps / between);
  track.rate = rate;
  // A worker's clock read coarsely, or a wait measured a little longer than the step, may give a busy time of
  // about zero: kept above a microsecond per step so that its speed stays finite.
  if (steps > 0 && first.busy && last.busy) track.busy_per_step = std::max(1e-6, (*last.busy - *first.busy) / steps);
}

std::vector<StragglerChange> StragglerDetector::evaluate(Clock::time_point now) {
  std::vector<StragglerChange> changes = std::move(pending_);
  pending_.clear();
  for (auto& [rank, track] : tracks_) measure(track, now);
  // Busy time when every rank with a rate reports it; step rates otherwise. Either way a "speed": higher is faster.
  bool busy_everywhere = true;
  for (const auto& [rank, track] : tracks_) busy_everywhere = busy_everywhere && (!track.rate || track.busy_per_step);
  const StragglerBasis basis = busy_everywhere ? StragglerBasis::kBusyTime : StragglerBasis::kStepRate;
  const auto speed_of = [basis](const Track& track) -> std::optional<double> {
    if (!track.rate) return std::nullopt;
    return basis == StragglerBasis::kBusyTime ? 1 / *track.busy_per_step : *track.rate;
  };

  for (auto& [rank, track] : tracks_) {
    std::vector<double> others;
    std::vector<double> other_rates;
    for (const auto& [other_rank, other] : tracks_) {
      if (other_rank == rank || !other.rate) continue;
      others.push_back(*speed_of(other));
      other_rates.push_back(*other.rate);
    }
    const std::optional<double> speed = speed_of(track);
    if (!speed || others.empty()) {  // not judged now: a flag cannot stand without evidence
      track.slow_since.reset();
      end_episode(rank, track, now, StragglerChange::Kind::kAlone, &changes);
      continue;
    }
    const double median = median_of(others);
    StragglerChange change{rank, StragglerChange::Kind::kFlagged, basis, *track.rate, median_of(other_rates)};
    if (basis == StragglerBasis::kBusyTime) {
      change.busy_per_step = *track.busy_per_step;
      change.median_busy_per_step = 1 / median;
    }
    if (!track.episode) {
      if (*speed >= (1 - settings_.margin) * median) {
        track.slow_since.reset();
        continue;
      }
      if (!track.slow_since) track.slow_since = now;
      if (now - *track.slow_since < sustain_) continue;
      track.episode = episodes_.size();
      StragglerEpisode episode{
          rank, basis, now, std::nullopt, change.step_rate, change.median_step_rate, change.step_rate};
      episode.busy_per_step = change.busy_per_step;
      episode.median_busy_per_step = change.median_busy_per_step;
      episode.highest_busy_per_step = change.busy_per_step;
      episodes_.push_back(episode);
      track.recovered_since.reset();
      change.seconds = seconds(std::min(window_, now - track.points.front().time));
      changes.push_back(change);
      continue;
    }
    StragglerEpisode& episode = episodes_[*track.episode];
    episode.lowest_step_rate = std::min(episode.lowest_step_rate, *track.rate);
    if (track.busy_per_step)
      episode.highest_busy_per_step = std::max(episode.highest_busy_per_step, *track.busy_per_step);
    if (*speed < (1 - settings_.margin / 2) * median) {
      track.recovered_since.reset();
      continue;
    }
    if (!track.recovered_since) track.recovered_since = now;
    if (now - *track.recovered_since < sustain_) continue;
    episode.end = now;
    track.episode.reset();
    track.slow_since.reset();
    track.recovered_since.reset();
    change.kind = StragglerChange::Kind::kRecovered;
    change.seconds = seconds(now - episode.start);
    changes.push_back(change);
  }
  return changes;
}

void StragglerDetector::end_episode(int rank, Track& track, Clock::time_point now, StragglerChange::Kind why,
                                    std::vector<StragglerChange>* changes) {
  if (!track.episode) return;
  StragglerEpisode& episode = episodes_[*track.episode];
  episode.end = now;
  track.episode.reset();
  track.recovered_since.reset();
  StragglerChange change{rank, why};
  change.seconds = seconds(now - episode.start);
  changes->push_back(change);
}

std::optional<double> StragglerDetector::step_rate(int rank) const {
  const auto found = tracks_.find(rank);
  return found == tracks_.end() ? std::nullopt : found->second.rate;
}

std::optional<double> StragglerDetector::busy_per_step(int rank) const {
  const auto found = tracks_.find(rank);
  return found == tracks_.end() ? std::nullopt : found->second.busy_per_step;
}

bool StragglerDetector::flagged(int rank) const {
  const auto found = tracks_.find(rank);
  return found != tracks_.end() && found->second.episode.has_value();
}

std::string straggler_message(const StragglerChange& change) {
  const bool busy = change.basis == StragglerBasis::kBusyTime;
  switch (change.kind) {
    case StragglerChange::Kind::kFlagged:
      if (busy) {
        return fmt::format(
            "rank {} is a straggler: {} s of own work per step against a median of {} s ({:.0f} % more; steps/s "
            "equal in lock-step: {} against {}) over the last {:.0f} s",
            change.rank, seconds_text(change.busy_per_step), seconds_text(change.median_busy_per_step),
            change.median_busy_per_step > 0 ? 100 * (change.busy_per_step / change.median_busy_per_step - 1) : 0.0,
            rate_text(change.step_rate), rate_text(change.median_step_rate), change.seconds);
      }
      return fmt::format(
          "rank {} is a straggler: {} steps/s against a median of {} ({:.0f} % slower) over the last {:.0f} s",
          change.rank, rate_text(change.step_rate), rate_text(change.median_step_rate),
          change.median_step_rate > 0 ? 100 * (1 - change.step_rate / change.median_step_rate) : 0.0, change.seconds);
    case StragglerChange::Kind::kRecovered:
      if (busy) {
        return fmt::format(
            "rank {} is no longer a straggler: {} s of own work per step against a median of {} s (flagged for "
            "{:.0f} s)",
            change.rank, seconds_text(change.busy_per_step), seconds_text(change.median_busy_per_step), change.seconds);
      }
      return fmt::format("rank {} is no longer a straggler: {} steps/s against a median of {} (flagged for {:.0f} s)",
                         change.rank, rate_text(change.step_rate), rate_text(change.median_step_rate), change.seconds);
    case StragglerChange::Kind::kLeft:
      return fmt::format("rank {} is no longer judged as a straggler: it exited or started over (flagged for {:.0f} s)",
                         change.rank, change.seconds);
    case StragglerChange::Kind::kAlone:
      break;
  }
  return fmt::format(
      "rank {} is no longer judged as a straggler: no other rank reports progress to compare it with (flagged for "
      "{:.0f} s)",
      change.rank, change.seconds);
}

}  // namespace mgtrain
