// The failure report: a readable table for stderr and the same facts as failure.json for
// schedulers and scripts. Pure formatting; the supervisor gathers the facts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "elastic/torch_error_file.hpp"
#include "util/exit_status.hpp"

namespace mgtrain {

struct FailedWorker {
  int global_rank = 0;
  int local_rank = 0;
  int attempt = 0;
  std::string host;
  long pid = 0;
  ExitStatus status;                      // how the process ended (unused when `hung`)
  bool hung = false;                      // the root cause of a hang: its progress stopped first (docs/diagnosis.md)
  bool waiting = false;                   // its progress stopped after the hung rank's: presumably waiting for it
  double silent_s = 0.0;                  // hung or waiting: seconds without progress
  std::optional<std::int64_t> last_step;  // hung or waiting: the step it last reported (none: touched only)
  std::string last_progress_utc;          // hung or waiting: ISO 8601 time of its last report
  long long last_progress_unix_ms = 0;    // the same in Unix milliseconds (compared across nodes); 0: unknown
  bool process_stopped = false;           // hung: its process was stopped (SIGSTOP)
  std::string stacks;                     // attempt_<n>/rank_<r>/stacks.txt when it was written, else ""
  std::vector<std::string> top_frames;    // from stacks: each thread's innermost frames (diagnose/top_frames.hpp)
  std::string time_utc;                   // ISO 8601, when the launcher saw the failure
  std::string stderr_log;                 // path of the rank's stderr.log
  std::vector<std::string> stderr_tail;   // last lines of stderr.log
  std::optional<TorchErrorRecord> error_file;  // TORCHELASTIC_ERROR_FILE, when the worker wrote it
  bool during_teardown = false;                // failed while the launcher was already stopping the group
  // Multi-node jobs only (docs/multinode.md):
  int node_rank = -1;         // the node of the failure; -1: a single-node job
  std::string node;           // "node 1 (hostB, 10.77.0.2)"
  bool node_lost = false;     // the node itself went away: no rank, `node_problem` says how
  std::string node_problem;   // "sent nothing for 10 s (launch.node_timeout 10 s)"
  std::string error_message;  // a remote worker's TORCHELASTIC_ERROR_FILE message (no traceback)
  // The launcher signalled this worker because its file timer expired (file_timer_table.hpp); "" otherwise.
  std::string expired_timer_scope;
  long expired_timer_pid = 0;
  double after_start_s = -1;  // seconds from its attempt's start to the failure; -1: unknown
  std::string hint;           // what to try, e.g. another interpreter when torch cannot be imported

  // "exit code 3", "signal SIGSEGV (11)", "hung: no progress for 30 s (last step 41)", or the node's problem.
  std::string outcome() const;
};

struct FailureReport {
  std::string run_id;
  std::string run_dir;
  int exit_code = 1;  // the launcher's exit code
  int attempt = 0;    // the attempt that failed (attempt_<n>/ of the logs)
  int max_restarts = 0;
  int port_retries = 0;  // attempts started again on a new store port, not counted: attempt - port_retries restarts
  FailedWorker root_cause;
  std::vector<FailedWorker> other_failures;
};

// How many of a failed worker's last stderr lines the report shows (and the store port's check reads).
inline constexpr std::size_t kStderrTailLines = 20;

// The table printed to stderr.
std::string format_failure_report(const FailureReport& report);

// One line for a scheduler's short status field (Kubernetes' termination message, docs/launch.md#termination-message):
// "mgtrain: run R failed (exit code N): rank 1 (local rank 1) on HOST: exit code 3: <the error file's message, else
// the last line of its stderr>", control characters escaped, at most `limit` bytes (cut at a UTF-8 character's
// start, "..." at the end).
inline constexpr std::size_t kSummaryLineLimit = 4096;  // what Kubernetes keeps of a termination message
std::string failure_summary_line(const FailureReport& report, std::size_t limit = kSummaryLineLimit);

// failure.json (schema in docs/launch.md).
std::string failure_report_to_json(const FailureReport& report);

// What the launcher writes to its own TORCHELASTIC_ERROR_FILE (as torchrun's @record main does, for schedulers):
// the root cause's error file copied with "errorCode" set to its exit code (torch's: -N for signal N) when the
// worker wrote one (`root_cause_error_text`), else a record in torch's format whose message is torch's
// ChildFailedError text. "other_failures" (mgtrain's addition) lists every other failed rank.
std::string launcher_error_file_json(const FailureReport& report,
                                     const std::optional<std::string>& root_cause_error_text,
                                     long long now_unix_seconds);

// For the failure report of a Python program: when a worker ended within `kQuickFailureSeconds` of its start and its
// stderr says torch is missing, the sentence naming the interpreter and how to choose another; "" otherwise.
inline constexpr double kQuickFailureSeconds = 30.0;
std::string missing_torch_hint(const std::string& stderr_text, double seconds_after_start,
                               const std::string& python_path, const std::string& python_source);

// Whether a worker's stderr lines say a bind failed because the address was in use: torch's TCPStore ("name:
// EADDRINUSE, message: address already in use", "(errno: 98 - Address already in use)") or Python's OSError
// ("[Errno 98] Address already in use"). Rank 0 saying so soon after its start: its store port was taken.
bool says_address_in_use(const std::vector<std::string>& stderr_lines);

}  // namespace mgtrain
