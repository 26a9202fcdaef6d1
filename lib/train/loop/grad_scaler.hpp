// Dynamic loss scaling for fp16 training, as torch.cuda.amp.GradScaler does it: the loss is multiplied by a scale
// before backward so small fp16 gradients do not flush to zero; before clipping and the optimizer step the
// gradients are divided by it again and checked; a step with an inf/nan gradient is skipped (and counted) and the
// scale backs off, and after growth_interval finite steps in a row it grows. Its state (scale, the finite-step
// streak, skipped steps) goes into checkpoints as "scaler/..." tensors.
//
// Agreement across ranks: the check runs after the gradient all-reduce, on the averaged gradients, which are
// bit-identical on every rank (inf and nan survive a sum), so every rank takes the same skip/backoff/growth decision
// without a collective of its own.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "train/models/model.hpp"

namespace mgtrain {

class TensorLookup;

struct GradScalerOptions {
  bool enabled = false;                 // off: scale 1, nothing checked, every step taken
  double init_scale = 65536.0;          // train.loss_scale_init
  double growth_factor = 2.0;           // train.loss_scale_growth_factor
  double backoff_factor = 0.5;          // train.loss_scale_backoff_factor
  std::int64_t growth_interval = 2000;  // train.loss_scale_growth_interval
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options);

  bool enabled() const { return options_.enabled; }
  // The factor the loss is multiplied by before backward (1 when disabled).
  double scale() const { return enabled() ? scale_ : 1.0; }

  // After backward (and the all-reduce): divides every defined gradient by the scale in place and reports whether
  // any gradient holds an inf or nan (one host synchronisation for all of them). Disabled: false, nothing touched.
  bool unscale_and_check(const std::vector<at::Tensor>& parameters);

  // The decision after the check, torch's GradScaler.update(): true = take the optimizer step. An inf/nan step is
  // skipped and counted, the scale is multiplied by backoff_factor and the streak restarts; otherwise the streak
  // grows, and at growth_interval the scale is multiplied by growth_factor and the streak restarts.
  bool update(bool found_inf);

  std::int64_t growth_tracker() const { return growth_tracker_; }  // finite steps since the last change
  std::int64_t skipped_steps() const { return skipped_steps_; }    // in this run, resumed runs included

  // "scaler/scale" (F64), "scaler/growth_tracker" and "scaler/skipped_steps" (I64), 0-dim CPU copies.
  NamedTensors state() const;
  // Restores what state() stored; a lookup without "scaler/scale" (a checkpoint of an fp32/bf16 run, or an older
  // one) leaves the initial scale. A malformed entry is a UsageError naming it.
  void restore(const TensorLookup& stored);

 private:
  GradScalerOptions options_;
  double scale_;
  std::int64_t growth_tracker_ = 0;
  std::int64_t skipped_steps_ = 0;
};

}  // namespace mgtrain
