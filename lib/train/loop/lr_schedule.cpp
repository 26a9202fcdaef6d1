// Warmup + decay arithmetic (see lr_schedule.hpp).
#include "train/loop/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace mgtrain {

LrSchedule::LrSchedule(const OptimConfig& optim, double peak_lr, std::int64_t total_steps)
    : optim_(optim), peak_(peak_lr), total_(std::max<std::int64_t>(total_steps, 1)) {}

double LrSchedule::at(std::int64_t step) const {
  const std::int64_t warmup = optim_.warmup_steps;
  if (step < warmup) return peak_ * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double floor_lr = std::min(optim_.min_lr, peak_);
  const std::int64_t decay_steps = std::max<std::int64_t>(total_ - warmup, 1);
  const double progress = std::clamp(static_cast<double>(step - warmup) / static_cast<double>(decay_steps), 0.0, 1.0);
  if (optim_.schedule == LrScheduleKind::Step) {
    return peak_ *
           std::pow(optim_.gamma, static_cast<double>((step - warmup) / std::max<std::int64_t>(optim_.step_size, 1)));
  }
  if (optim_.schedule == LrScheduleKind::Cosine)
    return floor_lr + (peak_ - floor_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
  if (optim_.schedule == LrScheduleKind::Linear) return peak_ - (peak_ - floor_lr) * progress;
  return peak_;  // constant
}

}  // namespace mgtrain
