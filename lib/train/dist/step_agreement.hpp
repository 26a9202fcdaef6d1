// What every rank must decide together at a step boundary: stop now (a rank got SIGTERM/SIGUSR1), save
// now (rank 0's clock says checkpoint.every_minutes passed, or a rank got SIGUSR2), or give up (rank 0 could
// not write a checkpoint). The votes are summed over ranks once per step and read after backward. On the CPU they
// ride along with the gradient reducer's last bucket (ReducerOptions::carry_elements), so a step has one meeting
// of the ranks less; otherwise (NCCL) a tiny all-reduce of their own is started before the step's work, so it
// overlaps the step instead of adding a round trip.
#pragma once

#include <cstdint>
#include <utility>

#include <ATen/core/Tensor.h>

#include "train/dist/communicator.hpp"
#include "train/torch/torch_compat.hpp"

namespace mgtrain {

struct StepVotes {
  bool stop = false;          // some rank was asked to stop
  bool save_due = false;      // rank 0: time for a time-based checkpoint
  bool writer_failed = false; // rank 0: the last checkpoint write failed
  bool save_requested = false; // some rank got SIGUSR2: save now and go on
};

class StepAgreement {
 public:
  static constexpr std::int64_t kVotes = 4;
  // `carrier`: GradientReducer::carried() (kVotes elements summed with the last bucket), or undefined.
  explicit StepAgreement(Communicator& comm, at::Tensor carrier = {}) : comm_(comm), carrier_(std::move(carrier)) {}
  // Every rank, same order: starts the vote with this rank's view.
  void begin(const StepVotes& mine);
  // The decision of all ranks (any rank's vote counts); with a carrier, after the step's finish_backward().
  StepVotes finish();

 private:
  Communicator& comm_;
  at::Tensor carrier_;
  at::Tensor votes_;
  torch_compat::WorkHandle work_;
};

}  // namespace mgtrain
