// Builds the configured LibTorch optimizer (sgd, adam, adamw) over the model's parameters, and sets its
// learning rate each step.
#pragma once

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include "config/config.hpp"

namespace mgtrain {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& optim, std::vector<at::Tensor> parameters,
                                                        double lr);
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace mgtrain
