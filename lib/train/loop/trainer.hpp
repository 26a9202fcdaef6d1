// The training loop of one rank: data shard, model, optimizer and schedule, DDP gradient reduction,
// gradient accumulation and clipping, periodic evaluation, rank-0 progress lines, and the final
// machine-readable summary line.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "contract/worker_identity.hpp"
#include "train/parallel/communicator.hpp"
#include "worker_io/heartbeat_writer.hpp"

namespace mgtrain {

struct EvalResult {
  double loss = 0.0;
  double accuracy = 0.0;    // classification: sample accuracy; language model: next-token accuracy
  double perplexity = 0.0;  // language model only (0 otherwise)
  std::int64_t samples = 0;
};

struct TrainSummary {
  std::int64_t steps = 0;  // optimizer steps
  // Epochs trained, the one in progress as its finished share: 0.64 after 64% of the first epoch (3 decimals, never
  // rounded up to a whole epoch that is not finished).
  double epochs = 0.0;
  double wall_s = 0.0;         // whole run, setup and evaluation included
  double samples_per_s = 0.0;  // all ranks together, training steps only, after warm-up
  double step_time_ms = 0.0;   // median optimizer step time after warm-up
  int world_size = 1;
  double final_train_loss = 0.0;  // mean loss of the last logging window on rank 0
  bool has_eval = false;
  EvalResult eval;
  std::string model;
  std::string device;
  std::string backend;
  std::string precision = "fp32";  // train.precision
  bool loss_scaling = false;       // fp16: a GradScaler ran
  double loss_scale = 0.0;         // its final scale
  std::int64_t skipped_steps = 0;  // optimizer steps skipped for inf/nan gradients
  double gpu_peak_mib = -1;        // CUDA: the caching allocator's peak of allocated memory on this rank; -1: no GPU
  int stop_signal = 0;             // SIGTERM/SIGUSR1 stopped training early after a checkpoint was saved
};

TrainSummary run_training(const Config& config, const WorkerIdentity& identity, Communicator& comm,
                          HeartbeatWriter& heartbeat);

// The one JSON line rank 0 prints at the end: {"summary": {...}}.
std::string summary_json_line(const TrainSummary& summary);

}  // namespace mgtrain
