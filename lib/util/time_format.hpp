// Times as text, always in UTC: the epoch clock, ISO 8601 stamps, strftime patterns; and durations for people
// (format_duration: "3m07s").
#pragma once

#include <optional>
#include <string>

namespace mgtrain {

// Milliseconds since the Unix epoch now.
long long unix_millis_now();
// Seconds since the Unix epoch now, with a fraction.
double unix_seconds_now();
// "2026-11-22T03:50:12.345Z"
std::string format_utc_millis(long long unix_millis);
// The inverse: Unix milliseconds of "2026-11-22T03:50:12.345Z"; nullopt for any other text.
std::optional<long long> parse_utc_millis(const std::string& text);
// "2026-11-22T03:50:12Z"
std::string format_utc_seconds(long long unix_seconds);
// A duration for messages: "30 s", "2.5 s" (whole seconds from 10 s up, or within 0.05 s of a whole one).
std::string format_seconds(double seconds);

// How format_duration shows a duration under a minute.
enum class DurationPrecision { WholeSeconds, Tenths };
// A duration for tables and progress lines, the largest two units: "45s" (or "44.6s" with Tenths), "3m07s",
// "2h05m", "1d02h". Negative or not finite: "?".
std::string format_duration(double seconds, DurationPrecision precision = DurationPrecision::WholeSeconds);
// With a strftime pattern, e.g. "%Y%m%d-%H%M%S" (run ids) or "%Y-%m-%d %H:%M:%S" (tables).
std::string format_utc(long long unix_seconds, const char* strftime_pattern);

}  // namespace mgtrain
