// The optimizer step and gradient clipping with multi-tensor operators (see multi_tensor_step.hpp).
#include "train/loop/multi_tensor_step.hpp"

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <memory>
#include <string>

#include "train/torch/torch_compat.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

using StateMap = std::remove_reference_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;

// The gradient of `p`, or an undefined tensor when it has none (the parameter is skipped, as LibTorch does).
at::Tensor gradient_of(const at::Tensor& p) {
  const at::Tensor& grad = p.grad();
  if (grad.defined() && grad.is_sparse())
    throw Error("optimizer: a parameter has a sparse gradient, which it cannot use");
  return grad;
}

// `p`'s state of type State, made by `make` when it has none yet.
template <typename State, typename Make>
State& state_of(StateMap& states, const at::Tensor& p, Make make) {
  const auto key = torch_compat::optimizer_state_key(states, p);
  auto found = states.find(key);
  if (found == states.end()) found = states.emplace(key, make()).first;
  return static_cast<State&>(*found->second);
}

// Adam and AdamW alike: AdamW decays the weights apart (decoupled), Adam adds the decay to the gradient (L2).
template <typename Options, typename State>
void adam_step(torch::optim::OptimizerParamGroup& group, StateMap& states, bool decoupled) {
  const auto& options = static_cast<const Options&>(group.options());
  const double lr = options.lr();
  const double beta1 = std::get<0>(options.betas());
  const double beta2 = std::get<1>(options.betas());
  const double weight_decay = options.weight_decay();
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
  std::vector<at::Scalar> correction2_sqrt, step_sizes;
  for (const at::Tensor& p : group.params()) {
    at::Tensor grad = gradient_of(p);
    if (!grad.defined()) continue;
    State& state = state_of<State>(states, p, [&] {
      auto made = std::make_unique<State>();
      made->step(0);
      made->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      made->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      if (options.amsgrad()) made->max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      return made;
    });
    state.step(state.step() + 1);
    const double correction1 = 1 - std::pow(beta1, static_cast<double>(state.step()));
    const double correction2 = 1 - std::pow(beta2, static_cast<double>(state.step()));
    correction2_sqrt.emplace_back(std::sqrt(correction2));
    step_sizes.emplace_back(-lr / correction1);
    params.push_back(p);
    grads.push_back(grad);
    exp_avgs.push_back(state.exp_avg());
    exp_avg_sqs.push_back(state.exp_avg_sq());
    if (options.amsgrad()) max_exp_avg_sqs.push_back(state.max_exp_avg_sq());
  }
  if (params.empty()) return;
  if (weight_decay != 0) {
    if (decoupled) {
      at::_foreach_mul_(params, 1 - lr * weight_decay);
    } else {
      grads = at::_foreach_add(grads, params, weight_decay);
    }
  }
  at::_foreach_mul_(exp_avgs, beta1);
  at::_foreach_add_(exp_avgs, grads, 1 - beta1);
  at::_foreach_mul_(exp_avg_sqs, beta2);
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2);
  std::vector<at::Tensor> denominators;
  if (options.amsgrad()) {
    for (std::size_t i = 0; i < max_exp_avg_sqs.size(); ++i)
      at::max_out(max_exp_avg_sqs[i], exp_avg_sqs[i], max_exp_avg_sqs[i]);
    denominators = at::_foreach_sqrt(max_exp_avg_sqs);
  } else {
    denominators = at::_foreach_sqrt(exp_avg_sqs);
  }
  at::_foreach_div_(denominators, correction2_sqrt);
  at::_foreach_add_(denominators, options.eps());
  at::_foreach_addcdiv_(params, exp_avgs, denominators, step_sizes);
}

void sgd_step(torch::optim::OptimizerParamGroup& group, StateMap& states) {
  const auto& options = static_cast<const torch::optim::SGDOptions&>(group.options());
  const double momentum = options.momentum();
  std::vector<at::Tensor> params, steps;
  std::vector<at::Tensor> buffers, buffered_steps;  // parameters that already have a momentum buffer
  std::vector<std::size_t> buffered;                // their indexes in params
  for (const at::Tensor& p : group.params()) {
    at::Tensor grad = gradient_of(p);
    if (!grad.defined()) continue;
    params.push_back(p);
    steps.push_back(grad);
  }
  if (params.empty()) return;
  if (options.weight_decay() != 0) steps = at::_foreach_add(steps, params, options.weight_decay());
  if (momentum != 0) {
    std::vector<at::Tensor> momentum_steps(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto key = torch_compat::optimizer_state_key(states, params[i]);
      auto found = states.find(key);
      if (found == states.end()) {  // the first step: the buffer starts as the step itself
        auto made = std::make_unique<torch::optim::SGDParamState>();
        made->momentum_buffer(at::clone(steps[i]).detach());
        momentum_steps[i] = made->momentum_buffer();
        states.emplace(key, std::move(made));
        continue;
      }
      buffers.push_back(static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer());
      buffered_steps.push_back(steps[i]);
      buffered.push_back(i);
      momentum_steps[i] = buffers.back();
    }
    if (!buffers.empty()) {
      at::_foreach_mul_(buffers, momentum);
      at::_foreach_add_(buffers, buffered_steps, 1 - options.dampening());
    }
    steps = options.nesterov() ? at::_foreach_add(steps, momentum_steps, momentum) : momentum_steps;
  }
  at::_foreach_add_(params, steps, -1 * options.lr());
}

}  // namespace

void multi_tensor_step(torch::optim::Optimizer& optimizer) {
  at::NoGradGuard no_grad;
  StateMap& states = optimizer.state();
  for (torch::optim::OptimizerParamGroup& group : optimizer.param_groups()) {
    if (dynamic_cast<torch::optim::SGD*>(&optimizer)) {
      sgd_step(group, states);
    } else if (dynamic_cast<torch::optim::AdamW*>(&optimizer)) {
      adam_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(group, states, /*decoupled=*/true);
    } else if (dynamic_cast<torch::optim::Adam*>(&optimizer)) {
      adam_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(group, states, /*decoupled=*/false);
    } else {
      throw Error("optimizer: only sgd, adam and adamw have a multi-tensor step");
    }
  }
}

void clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  const at::Tensor total = at::stack(at::_foreach_norm(grads, 2)).norm(2);
  const at::Tensor scale = at::clamp_max(max_norm / (total + 1e-6), 1.0);
#if MGTRAIN_TORCH_AT_LEAST(2, 1)
  at::_foreach_mul_(grads, scale);
#else
  for (at::Tensor& grad : grads) grad.mul_(scale);
#endif
}

}  // namespace mgtrain
