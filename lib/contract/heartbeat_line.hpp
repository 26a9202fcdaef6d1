// The progress file (MGTRAIN_HEARTBEAT_FILE, docs/diagnosis.md): the contract between any worker and the
// launcher's hang detection. A worker reports progress by touching the file, by writing a decimal step count
// ("41\n"), or with the heartbeat line mgtrain-worker rewrites, {"step":N,"loss":x,"time":unix} (loss null
// before the first step). The line may carry "wait": the seconds the rank has spent so far waiting for the other
// ranks (in collectives), which lets straggler detection tell a slow rank among ranks in lock-step
// (docs/diagnosis.md). Where the worker's run started ("start": its step, "from": none, checkpoint or snapshot) and its
// newest snapshot in memory ("snapshot": its step, "snapshot_time": Unix seconds it was completed) let the launcher say
// which copy a restart used and how old the newest snapshot is (docs/checkpoints.md#snapshots-in-memory). The
// launcher watches the file change (its time is the progress time) and reads the step back (parse_progress_step,
// parse_progress); the status API reads the whole line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mgtrain {

// What a worker's run started from: nothing (step 0), a checkpoint file, or a snapshot in memory.
enum class StartSource { kNone, kCheckpoint, kSnapshot };
// "none", "checkpoint", "snapshot": the heartbeat's "from", and run.json's and the status API's "resumed_from".
const char* start_source_name(StartSource source);
std::optional<StartSource> parse_start_source(std::string_view name);

struct HeartbeatInfo {
  std::int64_t step = 0;
  std::optional<double> loss;
  double time = 0;  // Unix seconds of the beat
  std::optional<double> wait =
      std::nullopt;  // seconds spent waiting for other ranks, from the worker's start up to the beat
  // The step this run of the worker started from: 0 for a fresh start, N after resuming from a checkpoint of step N
  // (the launcher counts the steps a restart lost by it). Unknown for programs that do not say.
  std::optional<std::int64_t> start_step = std::nullopt;
  std::optional<StartSource> start_source = std::nullopt;  // where that step came from ("from")
  // The rank's newest snapshot in memory: its step and the Unix seconds it was completed. Unknown without snapshots.
  std::optional<std::int64_t> snapshot_step = std::nullopt;
  std::optional<double> snapshot_time = std::nullopt;
};

// What straggler detection reads from a progress file.
struct ProgressReport {
  std::int64_t step = 0;
  // Seconds of the rank's own work (the beat's time minus its wait), from an arbitrary origin: only differences
  // between two reports of one rank mean anything. nullopt unless the line has a time and a wait.
  std::optional<double> busy;
};

std::string format_heartbeat_line(const HeartbeatInfo& info);  // one line, no newline
// nullopt when the text (trailing padding allowed) is not a heartbeat object with a step and a time.
std::optional<HeartbeatInfo> parse_heartbeat_line(std::string_view text);
// The step a progress file reports: the heartbeat line's step, or a decimal count (blanks around it allowed);
// nullopt for anything else (an empty, touched file).
std::optional<std::int64_t> parse_progress_step(std::string_view text);
// The step as parse_progress_step reads it, with the busy seconds when the line reports its wait.
std::optional<ProgressReport> parse_progress(std::string_view text);

}  // namespace mgtrain
