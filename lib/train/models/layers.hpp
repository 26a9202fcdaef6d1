// The network building blocks of the built-in models, as small torch::nn::Module subclasses over ATen's functional
// ops. They replace torch::nn's Linear/Conv2d/... holders, whose template machinery costs ~4 s of compile time per
// layer type per file, and they register parameters and buffers under exactly the names and in the order Python's
// torch.nn layers do ("weight", "bias", "running_mean", ...), with Python's default initialisation (same generator
// calls, so the same values for the same torch.manual_seed).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

namespace mgtrain::layers {

// A module with a one-tensor forward. Parameterless layers (ReLU, Flatten, ...) are modules too, so that a Sequence
// numbers its children the way Python's nn.Sequential does.
class Layer : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  at::Tensor operator()(const at::Tensor& x) { return forward(x); }
};

// nn.Sequential: children named "0", "1", ... applied in order.
class Sequence : public Layer {
 public:
  Sequence& add(std::shared_ptr<Layer> layer);
  at::Tensor forward(const at::Tensor& x) override;
  const std::vector<std::shared_ptr<Layer>>& children_in_order() const { return layers_; }

 private:
  std::vector<std::shared_ptr<Layer>> layers_;
};

// nn.Linear: weight [out, in], bias [out]; init U(±1/sqrt(in)) as kaiming_uniform_(a=sqrt(5)).
class Linear : public Layer {
 public:
  Linear(int64_t in, int64_t out, bool bias = true);
  at::Tensor forward(const at::Tensor& x) override;
  at::Tensor weight, bias;
};

// nn.Conv2d with a square kernel: weight [out, in, k, k], bias [out].
class Conv2d : public Layer {
 public:
  Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t padding = 0, bool bias = true);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t stride() const { return stride_; }
  int64_t padding() const { return padding_; }
  at::Tensor weight, bias;

 private:
  int64_t stride_, padding_;
};

// nn.BatchNorm2d (momentum 0.1, eps 1e-5, affine, tracking running statistics).
class BatchNorm2d : public Layer {
 public:
  static constexpr double kMomentum = 0.1, kEps = 1e-5;
  explicit BatchNorm2d(int64_t features);
  at::Tensor forward(const at::Tensor& x) override;
  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  // When set, forward() is this instead: SyncBatchNorm (train/parallel/sync_batch_norm.hpp) sets it to normalise with
  // the statistics of all ranks. The layer keeps its parameters, buffers and their names.
  std::function<at::Tensor(const at::Tensor&)> synchronised_forward;
};

// nn.LayerNorm over the last dimension (eps 1e-5, affine).
class LayerNorm : public Layer {
 public:
  explicit LayerNorm(int64_t features);
  at::Tensor forward(const at::Tensor& x) override;
  at::Tensor weight, bias;
};

// nn.Embedding: weight [count, dim] ~ N(0, 1).
class Embedding : public Layer {
 public:
  Embedding(int64_t count, int64_t dim);
  at::Tensor forward(const at::Tensor& indices) override;
  at::Tensor weight;
};

class ReLU : public Layer {
 public:
  at::Tensor forward(const at::Tensor& x) override;
};

// nn.Flatten(): [B, ...] → [B, prod(...)].
class Flatten : public Layer {
 public:
  at::Tensor forward(const at::Tensor& x) override;
};

// nn.MaxPool2d(kernel) (stride = kernel).
class MaxPool2d : public Layer {
 public:
  explicit MaxPool2d(int64_t kernel) : kernel_(kernel) {}
  at::Tensor forward(const at::Tensor& x) override;
  int64_t kernel() const { return kernel_; }

 private:
  int64_t kernel_;
};

// nn.Dropout(p): active only in training mode.
class Dropout : public Layer {
 public:
  explicit Dropout(double p) : p_(p) {}
  at::Tensor forward(const at::Tensor& x) override;
  double p() const { return p_; }

 private:
  double p_;
};

}  // namespace mgtrain::layers
