// The `tokens` data set: a flat file of little-endian uint16 token ids (nanoGPT's train.bin / val.bin layout),
// cut into fixed windows for next-token prediction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "train/data/data_source.hpp"

namespace mgtrain {

// `train_path` is the training token file. The test split is `val.bin` in the same directory when it exists (and is
// not `train_path` itself); otherwise the file is split by tokens: the first 90% train, the last 10% test.
// Sample i is the window of context_length + 1 tokens starting at token i * context_length (non-overlapping inputs,
// stride context_length): inputs are its first context_length tokens, targets the last context_length.
// Vocabulary size: "vocab_size" of `meta.json` beside the train file when present (as `mgtrain tokenize` writes it),
// else the largest id in the train and val files + 1. An odd file size, an empty file, an id outside the vocabulary
// or fewer than context_length + 1 tokens are UsageErrors naming the file.
std::unique_ptr<DataSource> open_token_data(const std::string& train_path, Split split, int64_t context_length);

}  // namespace mgtrain
