// Dynamic loss scaling: unscale, inf/nan check, skip/backoff/growth, checkpoint state (see grad_scaler.hpp).
#include "train/loop/grad_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "train/state/train_state.hpp"
#include "util/error.hpp"

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

namespace {

// The defined gradients of `parameters`, grouped by device (the fused kernel wants one device per call).
std::vector<std::vector<at::Tensor>> gradients_by_device(const std::vector<at::Tensor>& parameters) {
  std::vector<std::vector<at::Tensor>> groups;
  for (const at::Tensor& p : parameters) {
    const at::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const std::vector<at::Tensor>& g) { return g.front().device() == grad.device(); });
    if (group == groups.end()) {
      groups.push_back({grad});
    } else {
      group->push_back(grad);
    }
  }
  return groups;
}

// CUDA: torch's fused multi-tensor kernel (what torch.cuda.amp.GradScaler calls): one launch unscales every gradient
// and sets `found` to 1 on an inf/nan. Debian's 1.13 has no CPU kernel for it, so CPU gradients take the per-tensor
// path (loss scaling is an fp16-on-GPU feature; on the CPU it only runs in tests).
at::Tensor unscale_group(std::vector<at::Tensor>& grads, double inverse) {
  const at::Device device = grads.front().device();
  if (device.is_cuda()) {
    at::Tensor found = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device));
    const at::Tensor inv_scale = at::full({1}, inverse, at::TensorOptions().dtype(at::kFloat).device(device));
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found, inv_scale);
    return found;
  }
  at::Tensor found;
  for (at::Tensor& grad : grads) {
    grad.mul_(inverse);
    at::Tensor bad = at::logical_not(at::isfinite(grad)).sum();
    found = found.defined() ? found.add_(bad) : bad;
  }
  return found;
}

}  // namespace

bool GradScaler::unscale_and_check(const std::vector<at::Tensor>& parameters) {
  if (!enabled()) return false;
  at::NoGradGuard no_grad;
  const double inverse = 1.0 / scale_;
  std::vector<at::Tensor> found;
  for (auto& grads : gradients_by_device(parameters)) found.push_back(unscale_group(grads, inverse));
  // The flags are read once every kernel is queued: one host synchronisation per device (in practice one).
  return std::any_of(found.begin(), found.end(), [](const at::Tensor& f) { return f.item<double>() > 0; });
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
    throw UsageError(
        fmt::format("checkpoint: {} is missing or not a 0-dim {} tensor; the loss scaler's state is damaged "
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
    throw UsageError(
        fmt::format("checkpoint: the loss scaler's state is out of range (scale {}, growth_tracker {}, "
                    "skipped_steps {}); set checkpoint.resume: never to start over",
                    scale, tracker, skipped));
  }
  scale_ = scale;
  growth_tracker_ = tracker;
  skipped_steps_ = skipped;
}

}  // namespace mgtrain
