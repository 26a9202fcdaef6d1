// Dates (UTC) and durations as text (see time_format.hpp).
#include "util/time_format.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

namespace mgtrain {

long long unix_millis_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string format_utc(long long unix_seconds, const char* strftime_pattern) {
  const std::time_t seconds = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[64];
  const std::size_t length = std::strftime(buffer, sizeof buffer, strftime_pattern, &utc);
  return std::string(buffer, length);
}

std::string format_utc_seconds(long long unix_seconds) { return format_utc(unix_seconds, "%Y-%m-%dT%H:%M:%SZ"); }

std::string format_utc_millis(long long unix_millis) {
  const long long millis = ((unix_millis % 1000) + 1000) % 1000;
  return fmt::format("{}.{:03d}Z", format_utc((unix_millis - millis) / 1000, "%Y-%m-%dT%H:%M:%S"), millis);
}

std::optional<long long> parse_utc_millis(const std::string& text) {
  std::tm tm{};
  int millis = 0;
  char zone = 0;
  int used = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &millis, &zone, &used) != 8 ||
      zone != 'Z' || used != static_cast<int>(text.size()) || text.size() != 24) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const time_t seconds = timegm(&tm);
  if (seconds == static_cast<time_t>(-1)) return std::nullopt;
  return static_cast<long long>(seconds) * 1000 + millis;
}

std::string format_seconds(double seconds) {
  if (seconds >= 10 || std::fabs(seconds - std::round(seconds)) < 0.05) return fmt::format("{:.0f} s", seconds);
  return fmt::format("{:.1f} s", seconds);
}

std::string format_duration(double seconds, DurationPrecision precision) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (precision == DurationPrecision::Tenths && seconds < 59.95) return fmt::format("{:.1f}s", seconds);
  const long long s = std::llround(seconds);
  if (s >= 86400) return fmt::format("{}d{:02}h", s / 86400, (s % 86400) / 3600);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace mgtrain
