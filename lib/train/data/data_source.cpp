// The data set factory: maps the `data:` config section to one of the data set readers (see data_source.hpp).
#include "train/data/data_source.hpp"

#include <algorithm>
#include <cstring>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "train/data/cifar10_data.hpp"
#include "train/data/data_registry.hpp"
#include "train/data/mnist_data.hpp"
#include "train/data/npy_data.hpp"
#include "train/data/synthetic_data.hpp"
#include "train/data/token_data.hpp"
#include "util/error.hpp"

namespace mgtrain {

DataSource::~DataSource() = default;

std::unique_ptr<DataSource> open_data_source(const DataConfig& data, Split split, int64_t context_length,
                                             uint64_t seed) {
  switch (data.dataset) {  // -Wswitch: a new DatasetKind must be handled here
    case DatasetKind::Synthetic: {
      const int64_t samples = split == Split::Train ? data.synthetic_samples : kSyntheticTestSamples;
      return open_synthetic_data(data.input_shape, data.num_classes, samples, split, seed);
    }
    case DatasetKind::Mnist:
      return open_mnist_data(data.path, split);
    case DatasetKind::Cifar10:
      return open_cifar10_data(data.path, split);
    case DatasetKind::Tokens:
      return open_token_data(data.path, split, context_length);
    case DatasetKind::Npy:
      return open_npy_data(data.path, split);
    case DatasetKind::Registered:
      return open_registered_data(data, split, context_length, seed);
  }
  throw Error(fmt::format("internal error: no data set for data.dataset {}", data.dataset));
}

void check_sample_indices(const std::vector<int64_t>& indices, int64_t size) {
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= size) {
      throw Error(fmt::format("sample index {} (position {} of the batch) is outside the data set of {} samples",
                              indices[i], i, size));
    }
  }
}

at::Tensor gather_rows(const at::Tensor& table, const std::vector<int64_t>& indices) {
  check_sample_indices(indices, table.size(0));
  std::vector<int64_t> shape = table.sizes().vec();
  shape[0] = static_cast<int64_t>(indices.size());
  at::Tensor out = at::empty(shape, table.options());
  const size_t row_bytes =
      static_cast<size_t>(table.numel() / std::max<int64_t>(table.size(0), 1)) * table.element_size();
  const auto* in = static_cast<const uint8_t*>(table.data_ptr());
  auto* dst = static_cast<uint8_t*>(out.data_ptr());
  for (size_t i = 0; i < indices.size(); ++i) std::memcpy(dst + i * row_bytes, in + indices[i] * row_bytes, row_bytes);
  return out;
}

}  // namespace mgtrain
