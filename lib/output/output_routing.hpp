// Which worker streams reach the launcher's console: torchrun's --tee / --redirect values and
// --local-ranks-filter, resolved per local rank. Log files always receive both streams.
#pragma once

#include <string>
#include <vector>

namespace mgtrain {

// A set of standard streams, as torchrun's Std: 0 none, 1 stdout, 2 stderr, 3 both.
struct StreamSet {
  bool out = false;
  bool err = false;
};

// Parses a torchrun stream selection: one value for every rank ("3"), or a per-local-rank
// mapping ("0:1,1:3"; ranks not named get 0; ranks >= nproc are ignored, as torchrun does).
// `setting` names the key or flag in error messages. Throws UsageError.
std::vector<StreamSet> parse_stream_selection(const std::string& text, int nproc, const std::string& setting);

// Parses "0" or "0,2": the local ranks whose output reaches the console. Empty text: every rank.
// Throws UsageError for a rank outside [0, nproc).
std::vector<bool> parse_local_ranks_filter(const std::string& text, int nproc);

struct ConsoleRouting {
  bool stdout_to_console = true;
  bool stderr_to_console = true;
};

// torchrun semantics: a stream reaches the console unless redirected; tee puts a redirected stream
// back on the console. The filter then silences whole ranks. Throws UsageError.
std::vector<ConsoleRouting> resolve_console_routing(const std::string& tee, const std::string& redirect,
                                                    const std::string& local_ranks_filter, int nproc);

// launch.tty: which worker writes to a pseudo-terminal instead of pipes, so that isatty() holds in it and
// tqdm/rich draw as on a terminal. auto: local rank 0, each of its streams that reaches the console while
// the launcher's matching stream is a terminal; on: local rank 0's both streams; N: local rank N's; off: none.
enum class TtyMode { Auto, On, Off };
struct TtyChoice {
  TtyMode mode = TtyMode::Auto;
  int local_rank = 0;  // the worker that gets it (on: 0)
};

// Parses "auto", "on", "off" or a local rank. Throws UsageError naming launch.tty for other text or a
// local rank outside [0, nproc).
TtyChoice parse_tty_choice(const std::string& text, int nproc);

// Which of `local_rank`'s streams get a pseudo-terminal, given where they go and whether the launcher's
// own stdout / stderr are terminals.
StreamSet terminal_streams(const TtyChoice& choice, int local_rank, const ConsoleRouting& routing,
                           bool stdout_is_terminal, bool stderr_is_terminal);

}  // namespace mgtrain
