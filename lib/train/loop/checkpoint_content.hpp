// What a checkpoint holds, for a file on disk and a snapshot in memory alike: the tensors (model, optimizer, the fp16
// loss scale, every rank's RNG streams) and the metadata of a position (step, epoch, samples into it, world size,
// optimizer, the resolved config and its hash), and restoring all of it from a verified checkpoint. The file format
// is checkpoint/checkpoint_file.hpp; where checkpoints go and when is the Checkpointer's (disk) and MemorySnapshots'
// (memory).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <ATen/core/Tensor.h>

#include "checkpoint/checkpoint_file.hpp"
#include "config/config.hpp"
#include "train/loop/trainer.hpp"
#include "train/models/model.hpp"
#include "train/parallel/communicator.hpp"

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

class CheckpointContent {
 public:
  // `resolved_config`: the run's config as YAML (stored in every checkpoint with its hash).
  CheckpointContent(const Config& config, std::string resolved_config, Communicator& comm, Model& model,
                    torch::optim::Optimizer& optimizer);

  // fp16: the loss scaler whose state is saved with every checkpoint (when enabled) and restored by restore() (a
  // checkpoint without it leaves the initial scale). The scaler must outlive this object.
  void attach_grad_scaler(GradScaler* scaler) { scaler_ = scaler; }

  // Every rank's RNG streams: this rank's (capture_rng_state) and all ranks' as one row each.
  struct RngRows {
    NamedTensors mine;
    at::Tensor rows;  // [world, bytes of mine], U8, on the CPU
  };
  // Collective: every rank's RNG streams on every rank.
  RngRows gather_rng_rows();
  // The tensors to store: the model's and optimizer's (the live tensors: copy them before training goes on), the loss
  // scale, and "rank<r>/rng/..." for every rank r.
  NamedTensors tensors(const RngRows& rng) const;
  std::map<std::string, std::string> metadata(const TrainPosition& at, const std::string& reason,
                                              const EvalResult* eval) const;

  // Restores model, optimizer, loss scale and this rank's RNG from `file` (`what` names it in messages); returns
  // where training continues. A checkpoint of another optimizer is a UsageError; one saved by another world size
  // gives rank r the RNG of rank (r mod its world size). Rank 0 says what it resumed from (`what`, `seconds`).
  TrainPosition restore(const CheckpointFile& file, const std::string& what, double seconds);

  // The number under metadata `key`: CorruptCheckpoint when missing or not a non-negative integer.
  static std::int64_t metadata_int(const CheckpointFile& file, const std::string& key);

 private:
  void report(const std::string& what, const CheckpointFile& file, const TrainPosition& at, std::int64_t saved_world,
              double seconds) const;

  const Config& config_;
  std::string resolved_config_;
  Communicator& comm_;
  Model& model_;
  torch::optim::Optimizer& optimizer_;
  GradScaler* scaler_ = nullptr;
};

}  // namespace mgtrain
