// sgd / adam / adamw from OptimConfig (see optimizer_factory.hpp).
#include "train/loop/optimizer_factory.hpp"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "util/error.hpp"

namespace mgtrain {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& optim, std::vector<at::Tensor> parameters,
                                                        double lr) {
  if (optim.name == OptimizerName::Sgd) {
    if (optim.nesterov && optim.momentum <= 0.0)
      throw UsageError("optim.nesterov: Nesterov momentum needs optim.momentum > 0");
    auto options =
        torch::optim::SGDOptions(lr).momentum(optim.momentum).nesterov(optim.nesterov).weight_decay(optim.weight_decay);
    return std::make_unique<torch::optim::SGD>(std::move(parameters), options);
  }
  if (optim.name == OptimizerName::Adam) {
    auto options =
        torch::optim::AdamOptions(lr).betas({optim.beta1, optim.beta2}).eps(optim.eps).weight_decay(optim.weight_decay);
    return std::make_unique<torch::optim::Adam>(std::move(parameters), options);
  }
  if (optim.name == OptimizerName::Adamw) {
    auto options = torch::optim::AdamWOptions(lr)
                       .betas({optim.beta1, optim.beta2})
                       .eps(optim.eps)
                       .weight_decay(optim.weight_decay);
    return std::make_unique<torch::optim::AdamW>(std::move(parameters), options);
  }
  throw UsageError("optim.name: no optimizer for '" + std::string(name_of(optim.name)) + "'");
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace mgtrain
