// Dynamic loss scaling: unscale, inf/nan check, skip/backoff/growth, checkpoint state (see grad_scaler.hpp).
#include "train/loop/grad_scaler.hpp"

#include <cmath>
#include <cstring>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "util/error.hpp"
#include "train/state/train_state.hpp"

namespace mgtrain {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  if (!(options_.init_scale > 0) || !std::isfinite(options_.init_scale)) {
    throw UsageError(fmt::format("train.loss_scale_init {} must be a positive finite number", options_.init_scale));
  }
  if (options_.growth_factor < 1.0) {
    throw UsageError(fmt::format("train.loss_scale_growth_factor {} must be at least 1", options_.growth_factor));
  }
  if (!(options_.backoff_factor > 0) || options_.backoff_factor > 1.0) {
    throw UsageError(fmt::format("train.loss_scale_backoff_factor {} must be in (0, 1]", options_.backoff_factor));
  }
  if (options_.growth_interval < 1) {
    throw UsageError(fmt::format("train.loss_scale_growth_interval {} must be at least 1", options_.growth_interval));
  }
}

bool GradScaler::unscale_and_check(const std::vector<at::Tensor>& parameters) {
  if (!enabled()) return false;
  at::NoGradGuard no_grad;
  const double inverse = 1.0 / scale_;
  at::Tensor found;  // count of non-finite elements, on the gradients' device: one .item() at the end
  for (const at::Tensor& p : parameters) {
    const at::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    grad.mul_(inverse);
    at::Tensor bad = at::logical_not(at::isfinite(grad)).sum();
    found = found.defined() ? found.add_(bad.to(found.device())) : bad;
  }
  return found.defined() && found.item<std::int64_t>() > 0;
}

bool GradScaler::update(bool found_inf) {
  if (!enabled()) return true;
  if (found_inf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
    ++skipped_steps_;
    return false;
  }
  if (++growth_tracker_ >= options_.growth_interval) {
    const double grown = scale_ * options_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;  // as torch: never grow into inf
    growth_tracker_ = 0;
  }
  return true;
}

NamedTensors GradScaler::state() const {
  NamedTensors out;
  out.emplace_back("scaler/scale", at::scalar_tensor(scale_, at::kDouble));
  out.emplace_back("scaler/growth_tracker", at::scalar_tensor(growth_tracker_, at::kLong));
  out.emplace_back("scaler/skipped_steps", at::scalar_tensor(skipped_steps_, at::kLong));
  return out;
}

namespace {

template <typename T>
T read_scalar(const TensorLookup& stored, const std::string& name, const char* dtype) {
  const TensorView* view = stored.find(name);
  if (!view || view->dtype != dtype || !view->shape.empty() || view->nbytes != sizeof(T) || !view->data) {
    throw UsageError(fmt::format("checkpoint: {} is missing or not a 0-dim {} tensor; the loss scaler's state is damaged "
                                 "(set checkpoint.resume: never to start over)",
                                 name, dtype));
  }
  T value;
  std::memcpy(&value, view->data, sizeof value);
  return value;
}

}  // namespace

void GradScaler::restore(const TensorLookup& stored) {
  if (!stored.find("scaler/scale")) return;  // saved without loss scaling: keep the initial scale
  const double scale = read_scalar<double>(stored, "scaler/scale", "F64");
  const auto tracker = read_scalar<std::int64_t>(stored, "scaler/growth_tracker", "I64");
  const auto skipped = read_scalar<std::int64_t>(stored, "scaler/skipped_steps", "I64");
  if (!(scale > 0) || !std::isfinite(scale) || tracker < 0 || skipped < 0) {
    throw UsageError(fmt::format("checkpoint: the loss scaler's state is out of range (scale {}, growth_tracker {}, "
                                 "skipped_steps {}); set checkpoint.resume: never to start over",
                                 scale, tracker, skipped));
  }
  scale_ = scale;
  growth_tracker_ = tracker;
  skipped_steps_ = skipped;
}

}  // namespace mgtrain
