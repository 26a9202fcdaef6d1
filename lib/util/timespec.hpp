// A std::chrono duration as the timespec that ppoll(2) and friends take (a negative one is zero).
#pragma once

#include <time.h>

#include <chrono>

namespace mgtrain {

inline timespec to_timespec(std::chrono::nanoseconds duration) {
  if (duration < std::chrono::nanoseconds::zero()) duration = std::chrono::nanoseconds::zero();
  const auto whole = std::chrono::duration_cast<std::chrono::seconds>(duration);
  const auto nanos = duration - whole;
  return timespec{static_cast<time_t>(whole.count()), static_cast<long>(nanos.count())};
}

}  // namespace mgtrain
