// Wall-clock times as text, always in UTC: the epoch clock, ISO 8601 stamps, strftime patterns, durations for
// messages.
#pragma once

#include <string>

namespace mgtrain {

// Milliseconds since the Unix epoch now.
long long unix_millis_now();
// Seconds since the Unix epoch now, with a fraction.
double unix_seconds_now();
// "2026-11-22T03:50:12.345Z"
std::string format_utc_millis(long long unix_millis);
// "2026-11-22T03:50:12Z"
std::string format_utc_seconds(long long unix_seconds);
// A duration for messages: "30 s", "2.5 s" (whole seconds from 10 s up, or within 0.05 s of a whole one).
std::string format_seconds(double seconds);
// With a strftime pattern, e.g. "%Y%m%d-%H%M%S" (run ids) or "%Y-%m-%d %H:%M:%S" (tables).
std::string format_utc(long long unix_seconds, const char* strftime_pattern);

}  // namespace mgtrain
