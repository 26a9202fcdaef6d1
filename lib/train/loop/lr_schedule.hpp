// Learning rate per optimizer step: linear warmup, then constant, step, cosine or linear decay.
// Pure arithmetic (no LibTorch), unit-tested on its own.
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace mgtrain {

class LrSchedule {
 public:
  // peak_lr: optim.lr, already scaled by the world size when optim.scale_lr_with_world_size is on.
  LrSchedule(const OptimConfig& optim, double peak_lr, std::int64_t total_steps);
  // The rate to use for optimizer step `step` (0-based).
  double at(std::int64_t step) const;

 private:
  OptimConfig optim_;
  double peak_;
  std::int64_t total_;
};

}  // namespace mgtrain
