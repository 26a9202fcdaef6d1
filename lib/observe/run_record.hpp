// <run dir>/run.json, the run history record (docs/monitoring.md#run-history): the launcher (node 0) writes it
// atomically when the workers are about to start, with status "running", and rewrites it when the launch ends
// with the status, exit code and end time. A launcher killed by SIGKILL (or a machine that went down) leaves
// "running" behind; readers then report "interrupted" when the launcher recorded in the file no longer runs
// (its pid gone, reused by another process, or another boot of the machine).
// A relaunch with the same run id moves the earlier run.json to earlier/<k>/run.json with the rest of that
// launch's files, so run.json always describes the latest launch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "contract/heartbeat_line.hpp"
#include "contract/log_layout.hpp"

namespace mgtrain {

// Which process holds a running record: enough to tell later whether it still runs.
struct LauncherIdentity {
  long pid = 0;
  std::string host;           // gethostname()
  std::string boot_id;        // /proc/sys/kernel/random/boot_id
  long long start_ticks = 0;  // the process's start time since boot, in clock ticks (/proc/<pid>/stat field 22)
};

// A period in which a rank was flagged as a straggler (observe/straggler_detector.hpp), in Unix seconds.
struct StragglerRecord {
  int rank = 0;
  int attempt = 0;
  double start = 0;
  std::optional<double> end;  // nullopt: it lasted until the record was written
  double step_rate = 0;       // steps/s when flagged
  double median_step_rate = 0;
  double lowest_step_rate = 0;
  // Ranks compared by busy time (in lock-step, docs/diagnosis.md): own-work seconds per step when flagged,
  // the other ranks' median then, the rank's highest during the episode. nullopt: compared by step rates.
  std::optional<double> busy_per_step = std::nullopt;
  std::optional<double> median_busy_per_step = std::nullopt;
  std::optional<double> highest_busy_per_step = std::nullopt;
  std::string host = "";                        // several nodes: the rank's node's hostname ("": one node)
  std::optional<int> node_rank = std::nullopt;  // several nodes: its node rank
};

// One node: an attempt of the worker group and where it started, as rank 0's progress file said (heartbeat "start" and
// "from"): every attempt after the first, and a first one that resumed. Several nodes: a round's recovery says it.
struct ResumeRecord {
  int attempt = 0;
  long long step = 0;  // the step it started from
  StartSource from = StartSource::kNone;
  double time = 0;  // Unix seconds of the first beat that said it
};

// Several nodes: one node's snapshot replication (docs/checkpoints.md#replicas-on-a-buddy-node) as the job's host last
// heard of it: what it sent its buddy, and the replicas it holds of the node before it. The status API shows all of
// it (ages from its own time); run.json keeps the counts and times, not `connected` or `held`.
struct NodeReplication {
  int node_rank = 0;
  std::string host;
  std::string buddy;  // "": none in its last round
  bool connected = false;
  long long sent = 0;
  long long skipped = 0;
  long long bytes_sent = 0;
  std::optional<long long> sent_step;  // the newest snapshot sent whole, and when its rank took it (Unix seconds)
  std::optional<double> sent_time;
  long long received = 0;
  struct Held {
    int rank = 0;
    long long step = 0;
    double time = 0;
  };
  std::vector<Held> held;
  double time = 0;  // when the host heard it (Unix seconds): sent_time's age then is time - sent_time
};

// Several nodes: one rendezvous round of the job (multinode's RoundRecord, in Unix seconds).
struct RoundEntry {
  struct Node {
    int node_rank = 0;
    std::string host;
    std::string address;
    int first_rank = 0;
    int nproc = 0;
  };
  int round = 0;
  int restart_count = 0;
  std::string started_by;  // start | restart | scale-up
  double start = 0;
  std::optional<double> end;
  int world_size = 0;
  std::vector<Node> nodes;
  std::string ended_by;  // "" while it runs | finished | failure | regroup | abandoned
  std::string cause;
  // A round that ended by a failure or a regroup, once the next round ran (docs/monitoring.md#recovery): seconds from
  // the fault (the failed worker's exit; the decision, for a lost node or a regroup) to each phase of the recovery.
  struct Recovery {
    double fault = 0;  // Unix seconds
    std::optional<double> detected_s, stopped_s, rendezvous_s, first_step_s;
    std::optional<long long> last_step, resumed_step, steps_lost;
    bool resumed_step_exact = false;  // the workers said where they resumed ("start" in their heartbeat)
    // What they resumed from: a snapshot in memory, a checkpoint file, or nothing ("from" in their heartbeat).
    std::optional<StartSource> resumed_from;
  };
  std::optional<Recovery> recovery;
};

struct RunRecord {
  std::string run_id;
  std::string status = "running";  // running | succeeded | failed | stopped | interrupted
  std::optional<int> exit_code;
  std::vector<std::string> command_line;
  std::string cwd;
  std::vector<std::string> hosts;
  int nnodes = 1;
  int world_size = 1;
  double start_time = 0;  // Unix seconds
  std::optional<double> end_time;
  int attempts = 0;
  std::string config_file = log_layout::kConfigFileName;  // relative to the run directory
  LauncherIdentity launcher;
  std::vector<StragglerRecord> stragglers;   // "stragglers" in run.json only when there were any
  std::vector<ResumeRecord> resumes;         // "resumes" in run.json only when there were any
  std::vector<RoundEntry> rounds;            // several nodes: "rounds" (and "nodes", the last round's) in run.json
  std::vector<NodeReplication> replication;  // several nodes: "replication" in run.json, by node rank, when any
};

// A recovery as run.json and the status API write it: {"fault", "detected_s", "stopped_s", "rendezvous_s",
// "first_step_s", "last_step", "resumed_step", "steps_lost", "resumed_step_from", "resumed_from"}, unknown values null;
// compact text.
std::string recovery_to_json(const RoundEntry::Recovery& recovery);

// The record's JSON text (one object, indented, newline at the end).
std::string run_record_to_json(const RunRecord& record);
// Parses run.json's text; throws Error naming `source` and what is wrong.
RunRecord parse_run_record(const std::string& text, const std::string& source);

// Writes <run dir>/run.json atomically (temp file, fsync, rename). Throws SystemError naming the path.
void write_run_record(const std::string& run_dir, const RunRecord& record);
// Reads <run dir>/run.json; nullopt when there is none. Throws Error when it exists but cannot be read.
std::optional<RunRecord> read_run_record(const std::string& run_dir);

// The record of a launch starting now in this process: run id, this process's command line
// (/proc/self/cmdline), working directory, start time and launcher identity; status "running".
RunRecord start_run_record(const std::string& run_id, const std::vector<std::string>& hosts, int nnodes,
                           int world_size);
// The status of a launch that ended with `exit_code`: "succeeded" (0), "stopped" (the launcher got a signal
// such as Ctrl-C or SIGTERM, or the workers saved a checkpoint and stopped on request: exit 75), else "failed".
std::string finished_status(int exit_code, bool launcher_signalled, bool stopped_after_checkpoint);
// Sets status, exit code, end time (now) and attempts.
void finish_run_record(RunRecord& record, const std::string& status, int exit_code, int attempts);

// Moves an existing <run dir>/run.json of an earlier launch aside before a new one is written: into
// `archive_dir` when the run directory's other files were just archived there (prepare_run_directory), else
// into the next free <run dir>/earlier/<k>/. Returns where it went, or "" when there was none.
std::string keep_earlier_run_record(const std::string& run_dir, const std::string& archive_dir);

// The record of one launch in this process: the constructor writes it ("running"), finish() rewrites it with
// the outcome. If the launch leaves by an exception instead, the destructor records "failed" with exit code 1
// (mgtrain's own failure), so only a launcher that was killed leaves "running" behind.
class RunRecorder {
 public:
  // Throws SystemError when run.json cannot be written (the run directory is not writable).
  RunRecorder(std::string run_dir, RunRecord record);
  ~RunRecorder();
  RunRecorder(const RunRecorder&) = delete;
  RunRecorder& operator=(const RunRecorder&) = delete;
  // Returns "" or a warning to print: the launch's outcome must not change because run.json could not be written.
  std::string finish(const std::string& status, int exit_code, int attempts);
  // Records the straggler episodes so far and rewrites run.json now; "" or a warning to print.
  std::string set_stragglers(std::vector<StragglerRecord> stragglers);
  // One node: where each attempt started (ResumeRecord) so far, and rewrites run.json now; "" or a warning to print.
  std::string set_resumes(std::vector<ResumeRecord> resumes);
  // Several nodes: the job's rounds so far (and its size from the newest), and rewrites run.json now.
  std::string set_rounds(std::vector<RoundEntry> rounds);
  // Several nodes: each node's snapshot replication as last heard; rewrites run.json now.
  std::string set_replication(std::vector<NodeReplication> replication);

 private:
  std::string rewrite();    // run.json again with what changed, unless finish() wrote it: "" or a warning
  std::string write_now();  // run.json now: "" or a warning

  std::string run_dir_;
  RunRecord record_;
  bool finished_ = false;
};

// The identity of this process, for a record it is about to write.
LauncherIdentity this_launcher();
// Whether the launcher that wrote a "running" record still runs: kAlive, kGone (no such process, another
// process under that pid, or the machine rebooted since), or kUnknown (it ran on another host).
enum class LauncherState { kAlive, kGone, kUnknown };
LauncherState launcher_state(const LauncherIdentity& launcher);
// The status to show: "interrupted" for a "running" record whose launcher is gone, else the recorded one.
std::string effective_status(const RunRecord& record);

}  // namespace mgtrain
