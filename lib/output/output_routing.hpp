// Which worker streams reach the launcher's console: torchrun's --tee / --redirect and --local-ranks-filter,
// resolved per local rank (the launch plan, supervise/launch_plan.cpp, turns the config's typed values into the
// per-rank sets this rule takes), and which worker gets a pseudo-terminal. Log files always receive both streams.
#pragma once

#include <vector>

namespace mgtrain {

// A set of standard streams, as torchrun's Std: 0 none, 1 stdout, 2 stderr, 3 both.
struct StreamSet {
  bool out = false;
  bool err = false;
};

// The streams of a torchrun Std mode (0-3).
StreamSet streams_of_std(int mode);

struct ConsoleRouting {
  bool stdout_to_console = true;
  bool stderr_to_console = true;
  // The stream reaches the console through --tee (torchrun tails the log file: its lines get the [role0]: prefix).
  bool stdout_teed = false;
  bool stderr_teed = false;
};

// torchrun semantics, per local rank: a stream reaches the console unless redirected; tee puts a redirected stream
// back on the console; a rank not `shown` (launch.local_ranks_filter) prints nothing, teed or not. The three vectors
// have one entry per local rank.
std::vector<ConsoleRouting> resolve_console_routing(const std::vector<StreamSet>& tees,
                                                    const std::vector<StreamSet>& redirects,
                                                    const std::vector<bool>& shown);

// launch.tty: which worker writes to a pseudo-terminal instead of pipes, so that isatty() holds in it and
// tqdm/rich draw as on a terminal. auto: local rank 0, each of its streams that reaches the console while
// the launcher's matching stream is a terminal; on: local rank 0's both streams; N: local rank N's; off: none.
enum class TtyMode { Auto, On, Off };
struct TtyChoice {
  TtyMode mode = TtyMode::Auto;
  int local_rank = 0;  // the worker that gets it (on: 0)
};

// Which of `local_rank`'s streams get a pseudo-terminal, given where they go and whether the launcher's
// own stdout / stderr are terminals.
StreamSet terminal_streams(const TtyChoice& choice, int local_rank, const ConsoleRouting& routing,
                           bool stdout_is_terminal, bool stderr_is_terminal);

}  // namespace mgtrain
