// The trainable network interface the training loop drives, and the factory that builds one from `model:`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "config/config.hpp"

namespace mgtrain {

// What the data set says about its samples.
struct ModelInput {
  std::vector<int64_t> sample_shape;  // one input sample: {C, H, W}, {features...}, or {T} for tokens
  int64_t num_classes = 0;            // classes, or vocabulary size for tokens
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// A network with its parameters. Parameters (and buffers) are registered in a fixed order and initialised only from
// torch's global generator, so torch::manual_seed(s) before build_model gives identical models on every rank.
class Model {
 public:
  virtual ~Model();

  // Logits: [B, C] for classification, [B, T, V] for language models.
  virtual at::Tensor forward(const at::Tensor& inputs) = 0;
  // Mean cross entropy; [B, T, V] logits with [B, T] targets are flattened to [B*T, V] and [B*T].
  virtual at::Tensor loss(const at::Tensor& logits, const at::Tensor& targets);
  // Trainable parameters with Python's names ("features.0.weight"), in registration order (Python's
  // module.named_parameters() order). The tensors are the model's own (gradients appear in .grad()); they stay
  // the same tensor objects across to().
  virtual NamedTensors named_parameters() = 0;
  // Buffers (BatchNorm running statistics and counters), named and ordered likewise.
  virtual NamedTensors named_buffers() = 0;
  // Training mode (dropout active, BatchNorm batch statistics) or evaluation mode.
  virtual void train(bool on) = 0;
  virtual void to(const c10::Device& device) = 0;
  // One line: the architecture and the parameter count.
  virtual std::string summary() const = 0;
};

// Total number of elements of the model's parameters.
int64_t parameter_count(Model& model);

// Builds model.type:
//  mlp:         flatten → [Linear → ReLU (→ Dropout)] per model.hidden_sizes → Linear(num_classes); exactly Python's
//               nn.Sequential(nn.Flatten(), nn.Linear(...), nn.ReLU(), ...) (parameter names "1.weight", "1.bias",
//               ...).
//  cnn:         "features": per model.channels, Conv2d 3x3 pad 1 (→ BatchNorm2d) → ReLU → MaxPool2d(2);
//               "classifier": Flatten → [Linear → ReLU (→ Dropout)] per model.fc_sizes → Linear(num_classes).
//  resnet:      CIFAR-style ResNet (He et al. 2016, section 4.2): conv3x3(16)+BN+ReLU, three stages of
//               model.resnet_blocks basic blocks with 16, 32, 64 channels (stride 2 entering stages 2 and 3, 1x1
//               conv + BN projection shortcuts), global average pooling, Linear(num_classes); torchvision's names.
//  gpt:         decoder-only transformer (nanoGPT's layout and init, without weight tying): token and learned position
//               embeddings, model.layers pre-LN blocks of causal multi-head self-attention (model.heads) and a GELU
//               MLP of 4*d_model, final LayerNorm, bias-free LM head; model.dropout on embeddings, attention and
//               residual paths. Input [B, T] int64 with T <= model.context_length; vocabulary = num_classes.
//  torchscript: the module saved at model.path by torch.jit.script(...).save(); forward(inputs) must return logits.
// Invalid combinations (e.g. heads not dividing d_model, a cnn that pools a side below 1) are UsageErrors.
std::unique_ptr<Model> build_model(const ModelConfig& config, const ModelInput& input);

}  // namespace mgtrain
