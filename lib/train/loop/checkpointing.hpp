// Checkpoints for the trainer: what goes into one (model, optimizer, every rank's RNG, position, resolved
// config), the snapshot that training waits for, the background write on rank 0 (at most one in flight),
// the keep_last / best / latest bookkeeping, and resuming from the newest valid (or a named) checkpoint.
// The file format and directory policy are torch-free (checkpoint/checkpoint_file.hpp,
// checkpoint/checkpoint_directory.hpp); the tensors come from train/state/train_state.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "checkpoint/checkpoint_file.hpp"
#include "config/config.hpp"
#include "train/loop/trainer.hpp"
#include "train/models/model.hpp"
#include "train/parallel/communicator.hpp"
#include "train/state/train_state.hpp"
#include "util/error.hpp"

namespace torch::optim {
class Optimizer;
}

namespace mgtrain {

class GradScaler;

// Where a run stands: what a checkpoint records and a resumed run continues from.
struct TrainPosition {
  std::int64_t step = 0;              // optimizer steps done
  std::int64_t epoch = 0;             // the epoch in progress (0-based)
  std::int64_t samples_in_epoch = 0;  // samples of that epoch already consumed by all ranks together
};

// For a rank that must stop because rank 0 failed: waits until rank 0's process has gone (so the launcher
// names rank 0 as the root cause), then throws `error`.
[[noreturn]] void fail_after_rank0(Communicator& comm, const Error& error);

class Checkpointer {
 public:
  // `resolved_config`: the run's config as YAML (stored in every checkpoint with its hash).
  Checkpointer(const Config& config, std::string resolved_config, Communicator& comm, Model& model,
               torch::optim::Optimizer& optimizer, c10::Device device);
  ~Checkpointer();  // waits for a write in flight
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // checkpoint.dir is set: saving and resuming are on.
  bool enabled() const { return enabled_; }

  // fp16: the loss scaler whose state is saved with every checkpoint (when enabled) and restored by resume() (a
  // checkpoint without it leaves the initial scale). Call before resume(); the scaler must outlive this object.
  void attach_grad_scaler(GradScaler* scaler) { scaler_ = scaler; }

  // Collective. Per checkpoint.resume: rank 0 picks the checkpoint (the newest valid one, saying which damaged
  // ones it skipped and why; or the given path), every rank reads it and restores model, optimizer and its
  // RNG state. Returns where training continues, or nullopt to start from scratch.
  std::optional<TrainPosition> resume();

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
  // resume(): rank 0 picks the checkpoint (newest valid one, or checkpoint.resume's path) and every rank learns it.
  std::string choose_checkpoint() const;
  std::string agree_on_checkpoint();
  CheckpointFile read_chosen(const std::string& chosen) const;
  void report_resume(const std::string& chosen, const CheckpointFile& file, const TrainPosition& at,
                     std::int64_t saved_world, double seconds) const;
  // save(): whether to skip because a write is in flight (checkpoint.when_busy), every rank's RNG rows, rank 0's
  // tensors and metadata.
  bool agree_to_skip();
  at::Tensor gather_rng_rows(const NamedTensors& rng);
  NamedTensors state_to_save(const NamedTensors& rng, const at::Tensor& rng_rows);
  std::map<std::string, std::string> metadata_for(const TrainPosition& at, const std::string& reason,
                                                  const EvalResult* eval) const;

  const Config& config_;
  std::string resolved_config_;
  Communicator& comm_;
  Model& model_;
  torch::optim::Optimizer& optimizer_;
  c10::Device device_;
  bool enabled_;
  std::string dir_;
  GradScaler* scaler_ = nullptr;
  std::unique_ptr<Writer> writer_;                   // rank 0 only
  std::chrono::steady_clock::time_point last_save_;  // or the start
};

}  // namespace mgtrain
