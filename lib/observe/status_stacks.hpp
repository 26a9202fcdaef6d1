// The status API's on-demand stack dump (POST /stacks, docs/monitoring.md): what the launcher answers, as plain
// data, and its JSON. The dump itself is the launcher's (launch/rank_diagnostics.hpp, on its event loop); the status
// server calls the dumper from the HTTP thread that asked, which waits for the loop's answer.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "observe/status_snapshot.hpp"

namespace mgtrain {

// One rank's part of a dump.
struct RankStacks {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  std::string stacks_file;  // stacks-K.txt in the rank's folder; "" when not even notes were written
  std::string outcome;      // "complete", "partial" or "failed" (diagnose::DumpOutcome)
  bool python_frames = false;
  bool native_frames = false;
  std::vector<std::string> top_frames;  // one line per thread, innermost first (diagnose/top_frames.hpp)
  std::vector<std::string> notes;       // what could not be taken and why
  double seconds = 0;
  // A multi-node job's dump on its host: the rank's node and host (its stacks file is on that host); -1 and "" for
  // a node's own ranks.
  int node_rank = -1;
  std::string host;
};

enum class StacksOutcome {
  kDumped,      // 200: `ranks` holds every running rank
  kBusy,        // 409 "busy": a dump (on demand or a hang's) is running now
  kNotRunning,  // 409 "not_running": no rank runs now (starting, between attempts, stopping, finished)
};

struct StacksDump {
  StacksOutcome outcome = StacksOutcome::kDumped;
  std::string message;  // kBusy, kNotRunning: why, in a sentence
  int attempt = 0;
  double time = 0;     // Unix seconds when the dump began
  double seconds = 0;  // how long it took
  std::vector<RankStacks> ranks;
  std::vector<std::string> notes;  // a multi-node job's nodes that did not dump, and why
};

// The longest a launcher's dump may take (launch.diagnose_timeout, capped here); `mgtrain status --stacks` waits a
// little longer for the answer.
inline constexpr double kMaxStacksDumpS = 60.0;

// The launcher's dump of the ranks `snapshot` shows running, called on an HTTP thread: a call while another dumps
// returns kBusy at once.
using StacksDumper = std::function<StacksDump(const StatusSnapshot& snapshot)>;

// The answer's JSON: {"run_id", "attempt", "time", "seconds", "ranks":[{rank, local_rank, pid, stacks_file, outcome,
// python_frames, native_frames, top_frames, notes, seconds[, node_rank, host]}], "notes"}, or
// {"error":"busy"|"not_running","message"} (compact).
std::string stacks_to_json(const StacksDump& dump, const std::string& run_id);
// The HTTP status of an answer: 200 for kDumped, 409 otherwise.
int stacks_http_status(const StacksDump& dump);

}  // namespace mgtrain
