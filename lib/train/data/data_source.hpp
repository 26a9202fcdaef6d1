// The data set interface of the trainer and the factory that opens one from the `data:` config section.
// Every data set is held in memory once opened; make_batch only gathers and converts samples.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "train/data/batch.hpp"

namespace mgtrain {

class DataSource {
 public:
  virtual ~DataSource();

  // Number of samples in this split.
  virtual int64_t size() const = 0;
  // Shape of one input sample: {1,28,28} (mnist), {3,32,32} (cifar10), data.input_shape (synthetic), {T} (tokens).
  virtual std::vector<int64_t> sample_shape() const = 0;
  // Number of classes, or the vocabulary size for token data.
  virtual int64_t num_classes() const = 0;
  // The samples at `indices` (each in [0, size())) stacked in that order. Safe to call from several threads at once.
  // Throws UsageError for an index out of range.
  virtual Batch make_batch(const std::vector<int64_t>& indices) const = 0;
  // One line for logs, e.g. "mnist /path (train): 60000 samples of 1x28x28, 10 classes".
  virtual std::string description() const = 0;
};

// Opens data.dataset from data.path:
//  synthetic: generated from `seed` (identical on every rank); train has data.synthetic_samples samples, test 10000.
//  mnist:     IDX files (raw or .gz) in the directory data.path.
//  cifar10:   CIFAR-10 binary batches in the directory data.path.
//  tokens:    uint16 token file data.path; samples are windows of `context_length` (+1 for the target) tokens.
//  npy:       NumPy arrays in the directory data.path: train_x.npy / train_y.npy, test_x.npy / test_y.npy.
//  registered: the data set the worker registered as data.registered (data_registry.hpp).
// Missing or malformed files raise UsageError naming the file; failed reads SystemError.
std::unique_ptr<DataSource> open_data_source(const DataConfig& data, Split split, int64_t context_length,
                                             uint64_t seed);

// Helpers for implementations of make_batch. They copy with plain loops on the calling thread: loader threads then
// use one core each and never enter ATen's intra-op thread pool, which belongs to the training step.
//
// Checks that each index lies in [0, size) (mgtrain::Error naming the index otherwise).
void check_sample_indices(const std::vector<int64_t>& indices, int64_t size);
// Rows `indices` of the contiguous CPU tensor `table` (first dimension = samples), stacked: table[indices].
at::Tensor gather_rows(const at::Tensor& table, const std::vector<int64_t>& indices);

}  // namespace mgtrain
