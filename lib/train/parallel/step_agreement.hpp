// What every rank must decide together at a step boundary: stop now (a rank got SIGTERM/SIGUSR1), save
// now (rank 0's clock says checkpoint.every_minutes passed, or a rank got SIGUSR2), or give up (rank 0 could
// not write a checkpoint). One tiny all-reduce per step carries the votes; it is started before the step's work and
// read after backward, so it overlaps the step instead of adding a round trip.
#pragma once

#include <chrono>

#include <ATen/core/Tensor.h>

#include "train/parallel/communicator.hpp"
#include "train/torch/torch_compat.hpp"

namespace mgtrain {

struct StepVotes {
  bool stop = false;            // some rank was asked to stop
  bool save_due = false;        // rank 0: time for a time-based checkpoint
  bool writer_failed = false;   // rank 0: the last checkpoint write failed
  bool save_requested = false;  // some rank got SIGUSR2: save now and go on
};

class StepAgreement {
 public:
  explicit StepAgreement(Communicator& comm) : comm_(comm) {}
  // Every rank, same order: starts the vote with this rank's view.
  void begin(const StepVotes& mine);
  // The decision of all ranks (any rank's vote counts).
  StepVotes finish();
  // Seconds finish() has spent so far waiting for the vote (as GradientReducer::wait_seconds).
  double wait_seconds() const { return std::chrono::duration<double>(waited_).count(); }

 private:
  Communicator& comm_;
  at::Tensor votes_;
  torch_compat::WorkHandle work_;
  std::chrono::steady_clock::duration waited_{};
};

}  // namespace mgtrain
