// /proc/<pid>/stat read once for everyone (state, parent, CPU ticks, start time), one process's CPU time and resident
// memory from it and /proc/<pid>/statm, and the CPU percentage between two readings (100 = one core busy). Used by
// the launcher's resource sampler, hang detection, stack dumps, run records and the shared-memory all-reduce.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace mgtrain {

// The fields of /proc/<pid>/stat that mgtrain reads.
struct ProcStat {
  char state = '?';           // R, S, D, T, t, Z, X, ...
  long long parent_pid = -1;  // field 4
  long long utime_ticks = 0;  // fields 14 and 15: CPU time in clock ticks
  long long stime_ticks = 0;
  long long start_ticks = -1;  // field 22: when it started, in clock ticks after boot
};

// Parses the text of /proc/<pid>/stat: "pid (comm) state ppid ...", where the command name may hold spaces and
// parentheses, so the fields follow the last ')'. nullopt when the text is not in that format.
std::optional<ProcStat> parse_proc_stat(std::string_view stat_text);
// nullopt when the process is gone (or /proc cannot be read).
std::optional<ProcStat> read_proc_stat(pid_t pid);

struct ProcessStats {
  double cpu_seconds = 0;      // utime + stime so far
  std::int64_t rss_bytes = 0;  // resident set size
};

// Parses the texts of /proc/<pid>/stat and /proc/<pid>/statm. nullopt when a text is not in its format.
std::optional<double> parse_proc_stat_cpu_seconds(std::string_view stat_text, long ticks_per_second);
std::optional<std::int64_t> parse_proc_statm_rss_bytes(std::string_view statm_text, long page_size);

// nullopt when the process is gone (or /proc cannot be read).
std::optional<ProcessStats> read_process_stats(pid_t pid);

// CPU percent over `wall_seconds` between two readings of the same process (0 when no time passed).
double cpu_percent(const ProcessStats& before, const ProcessStats& after, double wall_seconds);

}  // namespace mgtrain
