// train.precision for the training loop: which autocast dtype (if any) the forward pass runs in, the check that
// the device supports it, and a scope that switches autocast on for one forward pass. Master weights, gradients,
// the optimizer and the loss stay float32; only autocast-eligible ops (matmul, linear, conv, ...) run in 16 bits.
#pragma once

#include <string>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "config/config_enums.hpp"

namespace mgtrain {

struct Precision {
  PrecisionMode mode = PrecisionMode::Fp32;
  bool autocast = false;  // bf16, fp16
  c10::ScalarType dtype = c10::ScalarType::Float;
  bool loss_scaling = false;  // fp16: the gradients go through a GradScaler
};

// train.precision on `device`. fp16 on a CPU device is a UsageError (no fp16 autocast and no loss scaling there;
// it points to bf16).
Precision resolve_precision(PrecisionMode mode, const c10::Device& device);

// Autocast on for `device`'s type with precision's dtype while the scope lives (nothing when precision is fp32).
// On exit the previous autocast state comes back and the cast cache is cleared, as Python's torch.autocast does
// at its outermost exit: cached 16-bit copies of the weights must not outlive the optimizer step.
class AutocastScope {
 public:
  AutocastScope(const Precision& precision, const c10::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_type_ = c10::DeviceType::CPU;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Float;
};

}  // namespace mgtrain
