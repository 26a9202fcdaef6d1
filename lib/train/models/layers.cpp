// Forward passes and Python-identical default initialisation of the built-in layers (see layers.hpp).
#include "train/models/layers.hpp"

#include <cmath>

#include <ATen/ATen.h>

namespace mgtrain::layers {
namespace {

// torch.nn.init.kaiming_uniform_(w, a=sqrt(5)) followed by the bias init of nn.Linear / nn.ConvNd, computed with
// the same floating-point steps as Python so that the generator draws give the same values.
void init_like_python(at::Tensor& weight, at::Tensor& bias, int64_t fan_in) {
  at::NoGradGuard no_grad;
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1 + a * a));
  const double std_dev = gain / std::sqrt(static_cast<double>(fan_in));
  const double bound = std::sqrt(3.0) * std_dev;
  weight.uniform_(-bound, bound);
  if (bias.defined()) {
    const double bias_bound = fan_in > 0 ? 1 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    bias.uniform_(-bias_bound, bias_bound);
  }
}

}  // namespace

Sequence& Sequence::add(std::shared_ptr<Layer> layer) {
  register_module(std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
  return *this;
}

at::Tensor Sequence::forward(const at::Tensor& x) {
  at::Tensor y = x;
  for (const auto& layer : layers_) y = layer->forward(y);
  return y;
}

Linear::Linear(int64_t in, int64_t out, bool with_bias) {
  weight = register_parameter("weight", at::empty({out, in}));
  if (with_bias) bias = register_parameter("bias", at::empty({out}));
  init_like_python(weight, bias, in);
}

at::Tensor Linear::forward(const at::Tensor& x) { return at::linear(x, weight, bias); }

Conv2d::Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool with_bias)
    : stride_(stride), padding_(padding) {
  weight = register_parameter("weight", at::empty({out, in, kernel, kernel}));
  if (with_bias) bias = register_parameter("bias", at::empty({out}));
  init_like_python(weight, bias, in * kernel * kernel);
}

at::Tensor Conv2d::forward(const at::Tensor& x) {
  return at::conv2d(x, weight, bias, {stride_, stride_}, {padding_, padding_});
}

BatchNorm2d::BatchNorm2d(int64_t features) {
  weight = register_parameter("weight", at::ones({features}));
  bias = register_parameter("bias", at::zeros({features}));
  running_mean = register_buffer("running_mean", at::zeros({features}));
  running_var = register_buffer("running_var", at::ones({features}));
  num_batches_tracked = register_buffer("num_batches_tracked", at::zeros({}, at::kLong));
}

at::Tensor BatchNorm2d::forward(const at::Tensor& x) {
  if (synchronised_forward) return synchronised_forward(x);
  if (is_training()) {
    at::NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  return at::batch_norm(x, weight, bias, running_mean, running_var, is_training(), kMomentum, kEps,
                        /*cudnn_enabled=*/true);
}

LayerNorm::LayerNorm(int64_t features) {
  weight = register_parameter("weight", at::ones({features}));
  bias = register_parameter("bias", at::zeros({features}));
}

at::Tensor LayerNorm::forward(const at::Tensor& x) {
  return at::layer_norm(x, {weight.size(0)}, weight, bias, /*eps=*/1e-5, /*cudnn_enable=*/true);
}

Embedding::Embedding(int64_t count, int64_t dim) {
  weight = register_parameter("weight", at::empty({count, dim}));
  at::NoGradGuard no_grad;
  weight.normal_(0.0, 1.0);
}

at::Tensor Embedding::forward(const at::Tensor& indices) { return at::embedding(weight, indices); }

at::Tensor ReLU::forward(const at::Tensor& x) { return at::relu(x); }

at::Tensor Flatten::forward(const at::Tensor& x) { return x.flatten(1); }

at::Tensor MaxPool2d::forward(const at::Tensor& x) { return at::max_pool2d(x, {kernel_, kernel_}, {kernel_, kernel_}); }

at::Tensor Dropout::forward(const at::Tensor& x) {
  return p_ > 0 && is_training() ? at::dropout(x, p_, /*train=*/true) : x;
}

}  // namespace mgtrain::layers
