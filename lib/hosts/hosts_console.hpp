// The node agents' output on the `--hosts` launcher's console (docs/multinode.md, "One command for many hosts"):
// every line behind "[host] " as that agent's stream brought it, unfinished lines ('\r' updates) live. With console
// deduplication on (launch.console_dedup; auto: from 4 ranks in the job), the agents' whole rank lines ("[rank N]
// text", or "[ranks 0-3] text" where an agent merged its own ranks' copies) are merged across hosts by one ConsoleDedup
// over the job's ranks (output/console_dedup.hpp): the same text of the same stream from several hosts within the
// window leaves once, as "[ranks 0-7] text" without a host; what one host alone printed keeps its "[host] " and its own
// prefix. Other whole lines (the agents' "mgtrain: ..." messages, a custom prefix template's lines) pass untouched and
// keep their place behind held lines; a partial line releases what is held first, as on one node.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config_enums.hpp"
#include "config/config_request.hpp"
#include "config/launch_settings.hpp"
#include "output/console_dedup.hpp"
#include "output/console_writer.hpp"
#include "output/live_line_splitter.hpp"

namespace mgtrain {

// The job's ranks as far as this launcher can count them: the hosts' slots added up, or hosts x launch.nproc; with
// nproc auto, gpu or cpu and no slots each agent counts its own, and `count` is a lower bound (one per host).
struct JobRanks {
  std::int64_t count = 0;
  bool exact = true;
};
JobRanks job_ranks(const std::vector<HostSlots>& hosts, const NprocSpec& nproc);

// launch.console_dedup under --hosts, for this launcher and (passed on as --console-dedup) every agent: on or off as
// set; auto: on in mgtrain's personality when the job has at least kConsoleDedupAutoRanks ranks (JobRanks' count).
bool hosts_console_dedup_on(ConsoleDedupMode mode, Personality personality, const JobRanks& ranks);

class HostsConsole {
 public:
  using Clock = ConsoleDedup::Clock;

  // `dedup`: whether lines are merged across hosts, among the job's `ranks` (a line every one of them printed leaves
  // at once; when the count is not exact, lines wait for the window).
  HostsConsole(ConsoleWriter& console, bool dedup, const JobRanks& ranks,
               Clock::duration window = ConsoleDedup::kWindow);

  // A piece of one agent's stream (`owner`: the stream), shown behind `host_prefix` ("[host] ").
  void add_piece(bool to_stderr, const void* owner, const std::string& host_prefix,
                 const LiveLineSplitter::Piece& piece, Clock::time_point now);
  // When held lines are due (the loop wakes for them), and releasing them; release_all() releases everything (before
  // the launcher's own messages, and at the end).
  std::optional<Clock::time_point> deadline() const;
  void release_due(Clock::time_point now);
  void release_all();

 private:
  void write_released();

  ConsoleWriter& console_;
  std::optional<ConsoleDedup> dedup_;  // none: off
  int rank_limit_;                     // a rank prefix names ranks below it
  std::vector<ConsoleDedup::Released> released_;
};

}  // namespace mgtrain
