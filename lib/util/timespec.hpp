// Time conversions for waiting: seconds given as a number (config values, timeouts) as a steady_clock
// duration, and a std::chrono duration as the timespec that ppoll(2) and friends take (a negative one is zero).
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

inline timespec to_timespec(std::chrono::nanoseconds duration) {
  if (duration < std::chrono::nanoseconds::zero()) duration = std::chrono::nanoseconds::zero();
  const auto whole = std::chrono::duration_cast<std::chrono::seconds>(duration);
  const auto nanos = duration - whole;
  return timespec{static_cast<time_t>(whole.count()), static_cast<long>(nanos.count())};
}

}  // namespace mgtrain
