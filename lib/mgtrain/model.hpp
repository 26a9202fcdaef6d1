// Public API: the model interface the trainer drives, and ModuleModel, which turns any torch::nn::Module with a
// `forward(Tensor) -> Tensor` into one. See docs/trainer.md#bring-your-own-model.
//
// What the trainer needs of a model (mgtrain::Model, train/models/model.hpp):
//   forward(inputs)      logits: [B, C] for classification, [B, T, V] for sequences
//   loss(logits, targets) mean cross entropy unless overridden
//   named_parameters()   trainable tensors with stable names, in a fixed order: they are DDP-synchronised,
//                        checkpointed and exported under these names
//   named_buffers()      non-trainable state (BatchNorm statistics, ...), broadcast from rank 0 and checkpointed
//   train(on), to(device), summary()
// Initialise parameters only from torch's global generator: the trainer seeds it with train.seed before calling the
// factory, and rank 0's state is broadcast anyway.
#pragma once

#include "train/models/model.hpp"         // Model, ModelInput, NamedTensors
#include "train/models/module_model.hpp"  // ModuleModel<M>: M a torch::nn::Module class with forward(Tensor)
