// One process's CPU time and resident memory from /proc/<pid>/stat and /proc/<pid>/statm, and the CPU
// percentage between two readings (100 = one core busy). Used by the launcher's resource sampler.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace mgtrain {

struct ProcessStats {
  double cpu_seconds = 0;      // utime + stime so far
  std::int64_t rss_bytes = 0;  // resident set size
};

// Parses the text of /proc/<pid>/stat (the command name may hold spaces and parentheses) and
// /proc/<pid>/statm. nullopt when the text is not in that format.
std::optional<double> parse_proc_stat_cpu_seconds(std::string_view stat_text, long ticks_per_second);
std::optional<std::int64_t> parse_proc_statm_rss_bytes(std::string_view statm_text, long page_size);

// nullopt when the process is gone (or /proc cannot be read).
std::optional<ProcessStats> read_process_stats(pid_t pid);

// CPU percent over `wall_seconds` between two readings of the same process (0 when no time passed).
double cpu_percent(const ProcessStats& before, const ProcessStats& after, double wall_seconds);

}  // namespace mgtrain
