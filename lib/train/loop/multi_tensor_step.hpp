// The built-in trainer's optimizer step and gradient clipping over all parameters at once, with LibTorch's
// multi-tensor operators (at::_foreach_*), as PyTorch's Python optimizers and clip_grad_norm_ do by default on a GPU
// (foreach=True). LibTorch's C++ optimizers (torch::optim::SGD, Adam, AdamW) loop over the parameters with about ten
// kernels each, ~1,500 launches a step for a 12-layer GPT, and its C++ clip_grad_norm_ reads the norm back to the
// host, which stops the CPU from queueing ahead of the GPU (docs/PERFORMANCE.md, "On a GPU"). The arithmetic here is
// theirs, operation for operation (on the CPU the result is bit-identical: tests/train/test_multi_tensor_step.cpp),
// and the state lives in the optimizer's own objects, so checkpoints and their restore are unchanged.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

namespace mgtrain {

// One step of `optimizer` (an SGD, Adam or AdamW as make_optimizer builds them) for every parameter with a gradient,
// creating its state on the first step as LibTorch does. Throws Error for another optimizer or a sparse gradient.
void multi_tensor_step(torch::optim::Optimizer& optimizer);

// Scales the gradients of `parameters` so that their total 2-norm is at most `max_norm` (torch.nn.utils.
// clip_grad_norm_), without reading the norm back: the scale stays on the device.
void clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm);

}  // namespace mgtrain
