// The memory-mapped NumPy data set (see npy_data.hpp).
#include "train/data/npy_data.hpp"

#include <algorithm>
#include <cstring>

#include <ATen/ATen.h>
#include <c10/util/Half.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.hpp"
#include "worker_io/npy_file.hpp"

namespace mgtrain {
namespace {

std::string npy_path(const std::string& directory, Split split, const char* which) {
  return fmt::format("{}/{}_{}.npy", directory, split == Split::Train ? "train" : "test", which);
}

template <class T>
float element_as_float(const void* data, std::int64_t i) {
  T value;
  std::memcpy(&value, static_cast<const unsigned char*>(data) + i * sizeof(T), sizeof(T));
  return static_cast<float>(value);
}

// Element `i` of an array of `type`, as float32 (what the model gets) or int64 (labels).
float as_float(NpyType type, const void* data, std::int64_t i) {
  switch (type) {
    case NpyType::Bool:
    case NpyType::UInt8:
      return element_as_float<std::uint8_t>(data, i);
    case NpyType::Int8:
      return element_as_float<std::int8_t>(data, i);
    case NpyType::Int16:
      return element_as_float<std::int16_t>(data, i);
    case NpyType::UInt16:
      return element_as_float<std::uint16_t>(data, i);
    case NpyType::Int32:
      return element_as_float<std::int32_t>(data, i);
    case NpyType::UInt32:
      return element_as_float<std::uint32_t>(data, i);
    case NpyType::Int64:
      return element_as_float<std::int64_t>(data, i);
    case NpyType::UInt64:
      return element_as_float<std::uint64_t>(data, i);
    case NpyType::Float16: {
      std::uint16_t bits;
      std::memcpy(&bits, static_cast<const unsigned char*>(data) + i * 2, 2);
      return static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
    }
    case NpyType::Float32:
      return element_as_float<float>(data, i);
    case NpyType::Float64:
      return element_as_float<double>(data, i);
  }
  return 0.0f;
}

std::int64_t as_label(NpyType type, const void* data, std::int64_t i) {
  switch (type) {
    case NpyType::Int8:
      return *(static_cast<const std::int8_t*>(data) + i);
    case NpyType::UInt8:
      return *(static_cast<const std::uint8_t*>(data) + i);
    case NpyType::Int16: {
      std::int16_t v;
      std::memcpy(&v, static_cast<const unsigned char*>(data) + i * 2, 2);
      return v;
    }
    case NpyType::UInt16: {
      std::uint16_t v;
      std::memcpy(&v, static_cast<const unsigned char*>(data) + i * 2, 2);
      return v;
    }
    case NpyType::Int32: {
      std::int32_t v;
      std::memcpy(&v, static_cast<const unsigned char*>(data) + i * 4, 4);
      return v;
    }
    case NpyType::UInt32: {
      std::uint32_t v;
      std::memcpy(&v, static_cast<const unsigned char*>(data) + i * 4, 4);
      return v;
    }
    case NpyType::Int64:
    case NpyType::UInt64: {  // a uint64 above int64's range reads negative: refused as a negative label
      std::int64_t v;
      std::memcpy(&v, static_cast<const unsigned char*>(data) + i * 8, 8);
      return v;
    }
    default:
      return -1;
  }
}

// y as int64 class ids, checked: 1-d integers, N rows, no negative label.
at::Tensor read_labels(const NpyFile& y, std::int64_t rows, const std::string& x_path) {
  if (y.type() == NpyType::Bool || y.type() == NpyType::Float16 || y.type() == NpyType::Float32 ||
      y.type() == NpyType::Float64) {
    throw UsageError(fmt::format("{}: labels of dtype {}: expected integer class ids (e.g. y.astype('int64'))",
                                 y.path(), npy_type_name(y.type())));
  }
  if (y.shape().size() != 1) {
    throw UsageError(fmt::format("{}: labels of shape ({}): expected one class id per sample, shape (N,)", y.path(),
                                 fmt::join(y.shape(), ", ")));
  }
  if (y.rows() != rows) {
    throw UsageError(
        fmt::format("{} holds {} labels but {} holds {} samples: they must match", y.path(), y.rows(), x_path, rows));
  }
  at::Tensor labels = at::empty({rows}, at::kLong);
  auto* out = labels.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < rows; ++i) {
    out[i] = as_label(y.type(), y.data(), i);
    if (out[i] < 0) throw UsageError(fmt::format("{}: label {} of sample {} is negative", y.path(), out[i], i));
  }
  return labels;
}

class NpyData final : public DataSource {
 public:
  NpyData(NpyFile x, at::Tensor labels, std::int64_t classes, std::string description)
      : x_(std::move(x)), labels_(std::move(labels)), classes_(classes), description_(std::move(description)) {}

  int64_t size() const override { return x_.rows(); }
  std::vector<int64_t> sample_shape() const override {
    std::vector<int64_t> shape(x_.shape().begin() + 1, x_.shape().end());
    if (shape.empty()) shape.push_back(1);
    return shape;
  }
  int64_t num_classes() const override { return classes_; }
  std::string description() const override { return description_; }

  Batch make_batch(const std::vector<int64_t>& indices) const override {
    check_sample_indices(indices, size());
    std::vector<int64_t> shape = sample_shape();
    shape.insert(shape.begin(), static_cast<int64_t>(indices.size()));
    at::Tensor inputs = at::empty(shape, at::kFloat);
    float* out = inputs.data_ptr<float>();
    const std::int64_t per_row = x_.row_elements();
    for (size_t b = 0; b < indices.size(); ++b) {
      const std::int64_t first = indices[b] * per_row;
      if (x_.type() == NpyType::Float32) {
        std::memcpy(out + b * per_row, static_cast<const float*>(x_.data()) + first, per_row * sizeof(float));
      } else {
        for (std::int64_t e = 0; e < per_row; ++e) out[b * per_row + e] = as_float(x_.type(), x_.data(), first + e);
      }
    }
    return Batch{inputs, gather_rows(labels_, indices)};
  }

 private:
  NpyFile x_;
  at::Tensor labels_;
  std::int64_t classes_;
  std::string description_;
};

}  // namespace

std::unique_ptr<DataSource> open_npy_data(const std::string& directory, Split split) {
  const std::string x_path = npy_path(directory, split, "x");
  NpyFile x = NpyFile::open(x_path);
  at::Tensor labels = read_labels(NpyFile::open(npy_path(directory, split, "y")), x.rows(), x_path);
  if (x.rows() < 1) throw UsageError(fmt::format("{}: no samples (shape ({}))", x_path, fmt::join(x.shape(), ", ")));
  at::Tensor train_labels = labels;
  if (split == Split::Test) {
    const std::string train_x = npy_path(directory, Split::Train, "x");
    const NpyFile train_y = NpyFile::open(npy_path(directory, Split::Train, "y"));
    train_labels = read_labels(train_y, train_y.rows(), train_x);
  }
  const std::int64_t classes = train_labels.numel() ? train_labels.max().item<std::int64_t>() + 1 : 0;
  if (split == Split::Test && labels.numel()) {
    const std::int64_t largest = labels.max().item<std::int64_t>();
    if (largest >= classes) {
      throw UsageError(fmt::format("{}: label {} is not a class of the training labels (0 to {})",
                                   npy_path(directory, split, "y"), largest, classes - 1));
    }
  }
  const std::string description = fmt::format(
      "npy {} ({}): {} samples of {} {}, {} classes", x_path, split_name(split), x.rows(), npy_type_name(x.type()),
      fmt::join(std::vector<int64_t>(x.shape().begin() + 1, x.shape().end()), "x"), classes);
  return std::make_unique<NpyData>(std::move(x), std::move(labels), classes, description);
}

}  // namespace mgtrain
