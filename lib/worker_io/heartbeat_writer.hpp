// The worker's side of the hang watchdog and of the status API's per-rank view: rewrites
// MGTRAIN_HEARTBEAT_FILE (set by the launcher) in place as it makes progress, at most every
// `min_interval_ms`, so a stuck worker goes quiet and a live one costs about one pwrite per interval.
// The file holds one line of JSON, {"step":N,"loss":x,"time":unix}, with "wait" (seconds spent waiting for the other
// ranks so far, docs/diagnosis.md) when the trainer measures it, and where the run started and its newest snapshot
// (contract/heartbeat_line.hpp), padded to a fixed size so a rewrite never
// leaves the tail of a longer earlier line. Without the variable it does nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "contract/heartbeat_line.hpp"
#include "util/fd.hpp"

namespace mgtrain {

class HeartbeatWriter {
 public:
  explicit HeartbeatWriter(const std::string& path, int min_interval_ms = 200);
  ~HeartbeatWriter();
  HeartbeatWriter(const HeartbeatWriter&) = delete;
  HeartbeatWriter& operator=(const HeartbeatWriter&) = delete;

  // Records progress (the step number, and the step's loss when known); writes only if the interval has passed.
  void beat(std::int64_t progress);
  void beat(std::int64_t progress, double loss);
  void beat(std::int64_t progress, double loss, std::optional<double> wait_seconds);
  // Writes the newest progress that the interval held back, if any: for a worker about to block for long, whose
  // file would otherwise report an older step (up to min_interval_ms of steps) for as long as it blocks.
  void flush();
  // The step this run started from (0, or the step of the checkpoint or snapshot it resumed from) and which it was, in
  // every beat from now on.
  void set_start(std::int64_t step, StartSource source) {
    start_step_ = step;
    start_source_ = source;
  }
  // This rank's newest snapshot in memory (its step, the Unix seconds it was completed), in every beat from now on;
  // written at once (the newest beat again, with it), so the launcher sees a snapshot as soon as it is complete.
  void set_snapshot(std::int64_t step, double unix_time);
  bool active() const { return fd_.valid(); }
  static constexpr std::size_t kLineBytes = 240;  // the file's size: the JSON line, spaces, '\n'

 private:
  void write(const HeartbeatInfo& info);

  Fd fd_;
  std::chrono::steady_clock::duration min_interval_;
  std::chrono::steady_clock::time_point last_{};
  std::optional<HeartbeatInfo> held_;    // the newest beat the interval held back
  std::optional<HeartbeatInfo> newest_;  // the newest beat, written or held back
  std::optional<std::int64_t> start_step_;
  std::optional<StartSource> start_source_;
  std::optional<std::int64_t> snapshot_step_;
  std::optional<double> snapshot_time_;
};

}  // namespace mgtrain
