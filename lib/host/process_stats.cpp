// Reads and parses /proc/<pid>/stat and statm (see process_stats.hpp).
#include "host/process_stats.hpp"

#include <unistd.h>

#include <string>

#include "util/file_io.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

std::optional<std::string> read_proc_file(const std::string& path) {
  std::optional<std::string> text = try_read_file(path);
  if (!text || text->empty()) return std::nullopt;
  return text;
}

std::optional<long long> parse_field(std::string_view text) {
  if (text.empty()) return std::nullopt;
  return parse_int(std::string(text));
}

}  // namespace

std::optional<ProcStat> parse_proc_stat(std::string_view stat_text) {
  const std::size_t close = stat_text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = stat_text.substr(close + 1);
  ProcStat stat;
  bool have[4] = {false, false, false, false};  // ppid, utime, stime, starttime
  int field = 2;
  std::size_t at = 0;
  while (at < rest.size() && field < 22) {
    while (at < rest.size() && (rest[at] == ' ' || rest[at] == '\n')) ++at;
    if (at >= rest.size()) break;
    std::size_t end = rest.find_first_of(" \n", at);
    if (end == std::string_view::npos) end = rest.size();
    ++field;
    const std::string_view token = rest.substr(at, end - at);
    at = end;
    if (field == 3) {
      stat.state = token.size() == 1 ? token[0] : '?';
      continue;
    }
    long long* target[] = {&stat.parent_pid, &stat.utime_ticks, &stat.stime_ticks, &stat.start_ticks};
    const int index = field == 4 ? 0 : field == 14 ? 1 : field == 15 ? 2 : field == 22 ? 3 : -1;
    if (index < 0) continue;
    const std::optional<long long> value = parse_field(token);
    if (!value) return std::nullopt;
    *target[index] = *value;
    have[index] = true;
  }
  if (stat.state == '?' || !have[0] || !have[1] || !have[2]) return std::nullopt;
  if (!have[3]) stat.start_ticks = -1;
  return stat;
}

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  const std::optional<std::string> text = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  return text ? parse_proc_stat(*text) : std::nullopt;
}

std::optional<double> parse_proc_stat_cpu_seconds(std::string_view stat_text, long ticks_per_second) {
  const std::optional<ProcStat> stat = parse_proc_stat(stat_text);
  if (!stat || ticks_per_second <= 0) return std::nullopt;
  return static_cast<double>(stat->utime_ticks + stat->stime_ticks) / static_cast<double>(ticks_per_second);
}

std::optional<std::int64_t> parse_proc_statm_rss_bytes(std::string_view statm_text, long page_size) {
  // "size resident shared text lib data dt" in pages.
  std::size_t first_end = statm_text.find(' ');
  if (first_end == std::string_view::npos || page_size <= 0) return std::nullopt;
  std::string_view rest = statm_text.substr(first_end + 1);
  std::size_t second_end = rest.find_first_of(" \n");
  std::optional<long long> pages = parse_field(rest.substr(0, second_end));
  if (!pages || *pages < 0) return std::nullopt;
  return static_cast<std::int64_t>(*pages) * page_size;
}

std::optional<ProcessStats> read_process_stats(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  std::optional<std::string> stat = read_proc_file(base + "/stat");
  std::optional<std::string> statm = read_proc_file(base + "/statm");
  if (!stat || !statm) return std::nullopt;
  std::optional<double> cpu = parse_proc_stat_cpu_seconds(*stat, sysconf(_SC_CLK_TCK));
  std::optional<std::int64_t> rss = parse_proc_statm_rss_bytes(*statm, sysconf(_SC_PAGESIZE));
  if (!cpu || !rss) return std::nullopt;
  return ProcessStats{*cpu, *rss};
}

double cpu_percent(const ProcessStats& before, const ProcessStats& after, double wall_seconds) {
  if (wall_seconds <= 0) return 0;
  const double used = after.cpu_seconds - before.cpu_seconds;
  return used <= 0 ? 0 : 100.0 * used / wall_seconds;
}

}  // namespace mgtrain
