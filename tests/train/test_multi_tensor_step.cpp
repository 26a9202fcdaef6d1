// The trainer's multi-tensor optimizer step and clipping (train/loop/multi_tensor_step.hpp) against LibTorch's own
// C++ optimizers and clip_grad_norm_ on the CPU: the same parameters and optimizer state, bit for bit, step after step,
// for every optimizer make_optimizer builds with and without momentum, Nesterov, weight decay and AMSGrad; parameters
// without a gradient skipped; a state restored into the one made by the other path goes on alike.
#include "train/catch_with_torch.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/types.h>  // before clip_grad.h, which does not include it in LibTorch 1.13

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "train/loop/multi_tensor_step.hpp"
#include "util/error.hpp"

using namespace mgtrain;

namespace {

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)>;

std::vector<at::Tensor> parameters() {
  at::manual_seed(7);
  return {at::randn({5, 3}).requires_grad_(), at::randn({3}).requires_grad_(), at::randn({4, 2}).requires_grad_(),
          at::randn({2}).requires_grad_()};
}

// The same optimizer stepped by LibTorch and by multi_tensor_step over the same gradients for `steps` steps: every
// parameter equal bit for bit after each. Parameter 3 never gets a gradient; parameter 2 only from the third step on.
void check_alike(const MakeOptimizer& make, int steps = 5) {
  std::vector<at::Tensor> reference = parameters(), ours = parameters();
  std::unique_ptr<torch::optim::Optimizer> libtorch = make(reference);
  std::unique_ptr<torch::optim::Optimizer> multi = make(ours);
  for (int step = 0; step < steps; ++step) {
    at::manual_seed(100 + step);
    for (std::size_t i = 0; i < reference.size(); ++i) {
      if (i == 3 || (i == 2 && step < 2)) continue;
      const at::Tensor grad = at::randn(reference[i].sizes());
      reference[i].mutable_grad() = grad.clone();
      ours[i].mutable_grad() = grad.clone();
    }
    libtorch->step();
    multi_tensor_step(*multi);
    for (std::size_t i = 0; i < reference.size(); ++i) {
      CAPTURE(step, i);
      CHECK(at::equal(reference[i], ours[i]));
    }
  }
}

}  // namespace

TEST_CASE("multi-tensor step: sgd, bit for bit as LibTorch's", "[multi_tensor]") {
  check_alike([](std::vector<at::Tensor> p) {
    return std::make_unique<torch::optim::SGD>(std::move(p), torch::optim::SGDOptions(0.1));
  });
  check_alike([](std::vector<at::Tensor> p) {
    return std::make_unique<torch::optim::SGD>(std::move(p),
                                               torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(5e-4));
  });
  check_alike([](std::vector<at::Tensor> p) {
    return std::make_unique<torch::optim::SGD>(std::move(p),
                                               torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
  });
  check_alike([](std::vector<at::Tensor> p) {
    return std::make_unique<torch::optim::SGD>(std::move(p),
                                               torch::optim::SGDOptions(0.05).momentum(0.5).dampening(0.1));
  });
}

TEST_CASE("multi-tensor step: adam and adamw, bit for bit as LibTorch's", "[multi_tensor]") {
  check_alike([](std::vector<at::Tensor> p) {
    return std::make_unique<torch::optim::Adam>(std::move(p), torch::optim::AdamOptions(1e-2));
  });
  check_alike([](std::vector<at::Tensor> p) {
    return std::make_unique<torch::optim::Adam>(
        std::move(p), torch::optim::AdamOptions(1e-2).betas({0.8, 0.99}).eps(1e-6).weight_decay(0.01));
  });
  check_alike([](std::vector<at::Tensor> p) {
    return std::make_unique<torch::optim::Adam>(std::move(p), torch::optim::AdamOptions(1e-2).amsgrad(true));
  });
  check_alike([](std::vector<at::Tensor> p) {
    return std::make_unique<torch::optim::AdamW>(std::move(p), torch::optim::AdamWOptions(1e-3).weight_decay(0.1));
  });
  check_alike([](std::vector<at::Tensor> p) {
    return std::make_unique<torch::optim::AdamW>(std::move(p),
                                                 torch::optim::AdamWOptions(1e-3).weight_decay(0).amsgrad(true));
  });
}

TEST_CASE("multi-tensor step: a state LibTorch's step made goes on alike", "[multi_tensor]") {
  // Two LibTorch steps on both copies, then the third by each path: the state objects are the same kind.
  std::vector<at::Tensor> a = parameters(), b = parameters();
  torch::optim::AdamW first(a, torch::optim::AdamWOptions(1e-3).weight_decay(0.1));
  torch::optim::AdamW second(b, torch::optim::AdamWOptions(1e-3).weight_decay(0.1));
  for (int step = 0; step < 3; ++step) {
    at::manual_seed(step);
    for (std::size_t i = 0; i < a.size(); ++i) {
      const at::Tensor grad = at::randn(a[i].sizes());
      a[i].mutable_grad() = grad.clone();
      b[i].mutable_grad() = grad.clone();
    }
    first.step();
    if (step < 2) {
      second.step();
    } else {
      multi_tensor_step(second);
    }
  }
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(at::equal(a[i], b[i]));
}

TEST_CASE("multi-tensor clipping: the gradients as LibTorch's clip_grad_norm_ leaves them", "[multi_tensor]") {
  for (double max_norm : {0.5, 1.0, 1000.0}) {
    CAPTURE(max_norm);
    std::vector<at::Tensor> reference = parameters(), ours = parameters();
    at::manual_seed(3);
    for (std::size_t i = 0; i < 3; ++i) {  // parameter 3 has no gradient
      const at::Tensor grad = at::randn(reference[i].sizes()) * 2;
      reference[i].mutable_grad() = grad.clone();
      ours[i].mutable_grad() = grad.clone();
    }
    torch::nn::utils::clip_grad_norm_(reference, max_norm);
    clip_grad_norm(ours, max_norm);
    for (std::size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK(at::allclose(reference[i].grad(), ours[i].grad(), 1e-6, 1e-7));
    }
    CHECK_FALSE(ours[3].grad().defined());
  }
  std::vector<at::Tensor> none = parameters();
  clip_grad_norm(none, 1.0);  // nothing has a gradient: nothing to do
}

TEST_CASE("multi-tensor step: a sparse gradient is refused with a message", "[multi_tensor]") {
  std::vector<at::Tensor> p{at::zeros({4}).requires_grad_()};
  p[0].mutable_grad() = at::zeros({4}).to_sparse();
  torch::optim::SGD sgd(p, torch::optim::SGDOptions(0.1));
  CHECK_THROWS_WITH(multi_tensor_step(sgd), Catch::Contains("sparse gradient"));
}
