// The status API's on-demand stack dump for a single-node launch (POST /stacks, `mgtrain status --stacks`;
// docs/diagnosis.md): every rank that runs now, dumped without stopping it into its own folder of the
// current attempt as stacks-K.txt (K = 1, 2, ... per attempt: earlier dumps are kept, and stacks.txt stays the hang
// report's), by a deadline, with each rank's top frames and notes. Runs on the status server's HTTP thread, so the
// supervisor loop goes on; it takes the node's dump lock (RankDiagnostics::dump_lock), so it and a hang's collection
// never dump at once.
#pragma once

#include <mutex>
#include <string>

#include "diagnose/stack_dump.hpp"
#include "observe/status_stacks.hpp"

namespace mgtrain {

// The first number K >= 1 for which no rank folder of `rank_directories` has stacks-K.txt.
int next_stacks_number(const std::vector<std::string>& rank_directories);

// Dumps the ranks `snapshot` shows running (its phase must be "running", else kNotRunning) within `timeout_s`;
// kBusy while `dump_lock` is held (a hang's collection, another request). A rank whose pid is no longer this launcher's
// child (it ended since the snapshot) gets a note instead of a dump.
StacksDump dump_stacks_on_demand(const StatusSnapshot& snapshot, double timeout_s, std::timed_mutex& dump_lock,
                                 const diagnose::DumpOptions& options = {});

}  // namespace mgtrain
