// train.precision resolution and the autocast scope (see mixed_precision.hpp).
#include "train/loop/mixed_precision.hpp"

#include <fmt/format.h>

#include "train/torch/torch_compat.hpp"
#include "util/error.hpp"

namespace mgtrain {

Precision resolve_precision(PrecisionMode mode, const c10::Device& device) {
  Precision precision;
  precision.mode = mode;
  if (mode == PrecisionMode::Fp32) return precision;
  if (mode == PrecisionMode::Bf16) {
    precision.autocast = true;
    precision.dtype = c10::ScalarType::BFloat16;
    return precision;
  }
  if (!device.is_cuda()) {  // fp16
    throw UsageError(
        fmt::format("train.precision: fp16 needs a CUDA device, but this rank trains on {} (fp16 autocast "
                    "and dynamic loss scaling are GPU-only): use train.precision: bf16 on CPU, or fp32",
                    device.str()));
  }
  precision.autocast = true;
  precision.dtype = c10::ScalarType::Half;
  precision.loss_scaling = true;
  return precision;
}

AutocastScope::AutocastScope(const Precision& precision, const c10::Device& device) {
  if (!precision.autocast) return;
  active_ = true;
  device_type_ = device.type();
  previous_enabled_ = torch_compat::autocast_enabled(device_type_);
  previous_dtype_ = torch_compat::autocast_dtype(device_type_);
  torch_compat::set_autocast(device_type_, true, precision.dtype);
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  torch_compat::set_autocast(device_type_, previous_enabled_, previous_dtype_);
  if (!previous_enabled_) at::autocast::clear_cache();
}

}  // namespace mgtrain
