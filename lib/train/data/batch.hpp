// One mini-batch as the data sets hand it to the training loop, and which split of a data set is meant.
#pragma once

#include <ATen/core/Tensor.h>

namespace mgtrain {

// A batch on the CPU.
//  classification: inputs float32 [B, ...sample_shape], targets int64 [B] (class ids)
//  tokens:         inputs int64 [B, T], targets int64 [B, T] (the next token of each input position)
struct Batch {
  at::Tensor inputs;
  at::Tensor targets;
};

enum class Split { Train, Test };

inline const char* split_name(Split split) { return split == Split::Train ? "train" : "test"; }

}  // namespace mgtrain
