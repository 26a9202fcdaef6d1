// Checkpoints on disk for the trainer: the copy that training waits for, the background write on rank 0 (at most one
// in flight), the keep_last / best / latest bookkeeping, and resuming from the newest state: a snapshot in memory
// (memory_snapshots.hpp) when it is at least as new as the newest valid (or the named) checkpoint file, else that file.
// What a checkpoint holds is checkpoint_content.hpp; the file format and directory policy are torch-free
// (checkpoint/checkpoint_file.hpp, checkpoint/checkpoint_directory.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/checkpoint_file.hpp"
#include "config/config.hpp"
#include "contract/heartbeat_line.hpp"
#include "train/loop/checkpoint_content.hpp"
#include "train/loop/memory_snapshots.hpp"
#include "train/loop/trainer.hpp"
#include "train/parallel/communicator.hpp"
#include "train/state/train_state.hpp"
#include "util/error.hpp"

namespace mgtrain {

// For a rank that must stop because rank 0 failed: waits until rank 0's process has gone (so the launcher
// names rank 0 as the root cause), then throws `error`.
[[noreturn]] void fail_after_rank0(Communicator& comm, const Error& error);

class Checkpointer {
 public:
  // `content` says what goes into a checkpoint and restores it; it outlives this object.
  Checkpointer(const Config& config, CheckpointContent& content, Communicator& comm);
  ~Checkpointer();  // waits for a write in flight
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // checkpoint.dir is set: saving and resuming are on.
  bool enabled() const { return enabled_; }

  // Collective. Per checkpoint.resume: rank 0 picks the checkpoint (the newest valid one, saying which damaged
  // ones it skipped and why; or the given path), every rank reads it and restores model, optimizer and its
  // RNG state. `in_memory` (MemorySnapshots::survey, with auto or a path) is used instead when it is at least as
  // new as that file. Returns where training continues, or nullopt to start from scratch.
  std::optional<TrainPosition> resume(MemorySnapshots& memory, const std::optional<MemorySnapshots::Newest>& in_memory);
  // After resume(): what it resumed from (kNone: it started from scratch).
  StartSource resumed_from() const { return resumed_from_; }

  // Collective (every rank at the same step): takes the snapshot (training waits only for this copy and the
  // RNG gather), then rank 0 writes it — in the background with checkpoint.async — and prunes to keep_last.
  // `eval` (may be null) feeds checkpoint.best_metric. Returns false when the save was skipped because the
  // previous write was still in flight and checkpoint.when_busy is skip.
  bool save(const TrainPosition& at, const std::string& reason, const EvalResult* eval);

  // Rank 0: checkpoint.every_minutes have passed since the last save (or the start).
  bool save_due_by_time() const;
  // Rank 0: a write failed and was not yet reported (see take_write_error).
  bool write_failed() const;
  // Rank 0: the failed write's message (path and errno text), clearing it.
  std::string take_write_error();

  // Waits for a write in flight (rank 0); a failure is reported like any other.
  void wait_for_writes();

  class Writer;

 private:
  // resume(): rank 0 picks the checkpoint (newest valid one, or checkpoint.resume's path; or the snapshot in memory,
  // kMemory) and every rank learns it.
  struct Choice {
    std::string path;  // "": none
    std::int64_t step = -1;
  };
  Choice choose_checkpoint() const;
  std::string agree_on_checkpoint(const std::optional<MemorySnapshots::Newest>& in_memory);
  CheckpointFile read_chosen(const std::string& chosen) const;
  // save(): whether to skip because a write is in flight (checkpoint.when_busy).
  bool agree_to_skip();

  const Config& config_;
  CheckpointContent& content_;
  Communicator& comm_;
  StartSource resumed_from_ = StartSource::kNone;
  bool enabled_;
  std::string dir_;
  std::unique_ptr<Writer> writer_;                   // rank 0 only
  std::chrono::steady_clock::time_point last_save_;  // or the start
};

}  // namespace mgtrain
