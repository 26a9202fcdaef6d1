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

std::optional<double> parse_proc_stat_cpu_seconds(std::string_view stat_text, long ticks_per_second) {
  // "pid (comm) state ppid ... utime stime ...": fields after the last ')' start with field 3 (state);
  // utime and stime are fields 14 and 15.
  const std::size_t close = stat_text.rfind(')');
  if (close == std::string_view::npos || ticks_per_second <= 0) return std::nullopt;
  std::string_view rest = stat_text.substr(close + 1);
  int field = 2;
  std::optional<long long> utime, stime;
  std::size_t at = 0;
  while (at < rest.size() && field < 15) {
    while (at < rest.size() && rest[at] == ' ') ++at;
    std::size_t end = rest.find(' ', at);
    if (end == std::string_view::npos) end = rest.size();
    ++field;
    std::string_view token = rest.substr(at, end - at);
    while (!token.empty() && (token.back() == '\n')) token.remove_suffix(1);
    if (field == 14) utime = parse_field(token);
    if (field == 15) stime = parse_field(token);
    at = end;
  }
  if (!utime || !stime) return std::nullopt;
  return static_cast<double>(*utime + *stime) / static_cast<double>(ticks_per_second);
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
