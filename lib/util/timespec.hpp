// Time conversions for waiting: seconds given as a number (config values, timeouts) as a steady_clock
// duration, a std::chrono duration as the timespec that ppoll(2) and friends take (a negative one is zero), and a
// steady time as wall-clock time (ClockAnchor).
#pragma once

#include <time.h>

#include <chrono>

namespace mgtrain {

// `seconds` (fractions allowed) as a steady_clock duration, for deadlines.
inline std::chrono::steady_clock::duration steady_seconds(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

// The seconds from `from` to `to` (negative when `to` is earlier), for messages and decisions in seconds.
inline double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// The seconds from `from` until now, for timing a piece of work.
inline double seconds_since(std::chrono::steady_clock::time_point from) {
  return seconds_between(from, std::chrono::steady_clock::now());
}

// One reading of both clocks, so that a steady time of a launch can be shown as wall-clock time.
struct ClockAnchor {
  std::chrono::steady_clock::time_point steady = std::chrono::steady_clock::now();
  std::chrono::system_clock::time_point wall = std::chrono::system_clock::now();

  // `time` (steady) as Unix milliseconds.
  long long unix_millis_at(std::chrono::steady_clock::time_point time) const {
    const auto at = wall + std::chrono::duration_cast<std::chrono::system_clock::duration>(time - steady);
    return std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
  }
};

inline timespec to_timespec(std::chrono::nanoseconds duration) {
  if (duration < std::chrono::nanoseconds::zero()) duration = std::chrono::nanoseconds::zero();
  const auto whole = std::chrono::duration_cast<std::chrono::seconds>(duration);
  const auto nanos = duration - whole;
  return timespec{static_cast<time_t>(whole.count()), static_cast<long>(nanos.count())};
}

}  // namespace mgtrain
