// The memory-mapped NumPy data set (see npy_data.hpp).
#include "train/data/npy_data.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

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

// Calls f(T{}) with T the C++ type of `type`'s elements (c10::Half for float16; uint8 for bool).
template <class F>
auto with_element_type(NpyType type, F&& f) {
  switch (type) {
    case NpyType::Bool:
    case NpyType::UInt8:
      return f(std::uint8_t{});
    case NpyType::Int8:
      return f(std::int8_t{});
    case NpyType::Int16:
      return f(std::int16_t{});
    case NpyType::UInt16:
      return f(std::uint16_t{});
    case NpyType::Int32:
      return f(std::int32_t{});
    case NpyType::UInt32:
      return f(std::uint32_t{});
    case NpyType::Int64:
      return f(std::int64_t{});
    case NpyType::UInt64:
      return f(std::uint64_t{});
    case NpyType::Float16:
      return f(c10::Half{});
    case NpyType::Float32:
      return f(float{});
    case NpyType::Float64:
      return f(double{});
  }
  return f(std::uint8_t{});
}

// Element `i` of an array of `type` as R (labels: int64; a uint64 above int64's range reads negative and is refused
// as a negative label).
template <class R>
R element_as(NpyType type, const void* data, std::int64_t i) {
  return with_element_type(type, [&](auto tag) {
    decltype(tag) value;
    std::memcpy(&value, static_cast<const unsigned char*>(data) + i * sizeof(value), sizeof(value));
    return static_cast<R>(value);
  });
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
    out[i] = element_as<std::int64_t>(y.type(), y.data(), i);
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
    const auto* base = static_cast<const unsigned char*>(x_.data());
    with_element_type(x_.type(), [&](auto tag) {  // the type dispatched once per batch, not per element
      using T = decltype(tag);
      for (size_t b = 0; b < indices.size(); ++b) {
        const unsigned char* row = base + indices[b] * per_row * sizeof(T);
        float* to = out + b * per_row;
        if constexpr (std::is_same_v<T, float>) {
          std::memcpy(to, row, per_row * sizeof(float));
        } else {
          for (std::int64_t e = 0; e < per_row; ++e) {
            T value;
            std::memcpy(&value, row + e * sizeof(T), sizeof(T));
            to[e] = static_cast<float>(value);
          }
        }
      }
      return 0;
    });
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
