// IDX parsing with validation, and the in-memory MNIST-format data set (see mnist_data.hpp).
#include "train/data/mnist_data.hpp"

#include <algorithm>
#include <cstring>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "train/data/data_file.hpp"
#include "train/data/image_normalization.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

constexpr uint32_t kIdxImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension

uint32_t read_big_endian_u32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// An IDX file of unsigned bytes: its dimensions and a pointer to the payload inside `bytes`.
struct IdxArray {
  std::vector<uint8_t> bytes;
  std::vector<int64_t> dims;
  size_t payload_offset = 0;
  const uint8_t* payload() const { return bytes.data() + payload_offset; }
};

IdxArray read_idx(const std::string& path, uint32_t expected_magic, const char* what) {
  IdxArray idx;
  idx.bytes = read_data_file(path);
  const auto& b = idx.bytes;
  const size_t ndims = expected_magic & 0xff;
  const size_t header = 4 + 4 * ndims;
  if (b.size() < 4) {
    throw UsageError(
        fmt::format("{}: {} bytes is too short for an IDX file (expected {}, a {}-byte header and the data)", path,
                    b.size(), what, header));
  }
  const uint32_t magic = read_big_endian_u32(b.data());
  if (magic != expected_magic) {
    throw UsageError(fmt::format("{}: IDX magic 0x{:08x} is not 0x{:08x} (unsigned byte, {} dimension{}; expected {})",
                                 path, magic, expected_magic, ndims, ndims == 1 ? "" : "s", what));
  }
  if (b.size() < header) {
    throw UsageError(fmt::format("{}: truncated IDX header: {} bytes, the header of {} dimensions needs {}", path,
                                 b.size(), ndims, header));
  }
  uint64_t elements = 1;
  for (size_t d = 0; d < ndims; ++d) {
    const uint32_t dim = read_big_endian_u32(b.data() + 4 + 4 * d);
    if (dim == 0 || dim > (1u << 30))
      throw UsageError(fmt::format("{}: IDX dimension {} has invalid size {}", path, d, dim));
    idx.dims.push_back(dim);
    elements *= dim;
  }
  const uint64_t have = b.size() - header;
  if (have < elements) {
    throw UsageError(fmt::format("{}: truncated: the header promises {} ({} bytes of data) but only {} bytes follow it",
                                 path, fmt::join(idx.dims, "x"), elements, have));
  }
  if (have > elements) {
    throw UsageError(fmt::format("{}: {} unexpected trailing bytes after the {} data bytes of {}", path,
                                 have - elements, elements, fmt::join(idx.dims, "x")));
  }
  idx.payload_offset = header;
  return idx;
}

}  // namespace

std::unique_ptr<DataSource> open_mnist_data(const std::string& directory, Split split) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string images_path = find_data_file(directory, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_data_file(directory, prefix + "-labels-idx1-ubyte");
  const IdxArray images = read_idx(images_path, kIdxImagesMagic, "images");
  const IdxArray labels = read_idx(labels_path, kIdxLabelsMagic, "labels");
  const int64_t count = images.dims[0], rows = images.dims[1], cols = images.dims[2];
  if (labels.dims[0] != count) {
    throw UsageError(
        fmt::format("{}: {} labels, but {} has {} images", labels_path, labels.dims[0], images_path, count));
  }

  at::Tensor image_tensor = at::empty({count, 1, rows, cols}, at::kByte);
  std::memcpy(image_tensor.data_ptr<uint8_t>(), images.payload(), static_cast<size_t>(count * rows * cols));
  at::Tensor label_tensor = at::empty({count}, at::kLong);
  int64_t* label_out = label_tensor.data_ptr<int64_t>();
  int64_t max_label = 0;
  for (int64_t i = 0; i < count; ++i) {
    label_out[i] = labels.payload()[i];
    max_label = std::max(max_label, label_out[i]);
  }

  ChannelStats stats;
  if (split == Split::Train) {
    stats = channel_stats(images.payload(), count, 1, rows * cols);
  } else {
    const std::string train_path = find_data_file(directory, "train-images-idx3-ubyte");
    const IdxArray train = read_idx(train_path, kIdxImagesMagic, "images");
    if (train.dims[1] != rows || train.dims[2] != cols) {
      throw UsageError(fmt::format("{}: images are {}x{}, but {} has {}x{}", images_path, rows, cols, train_path,
                                   train.dims[1], train.dims[2]));
    }
    stats = channel_stats(train.payload(), train.dims[0], 1, rows * cols);
  }
  const int64_t classes = std::max<int64_t>(10, max_label + 1);
  std::string description =
      fmt::format("mnist {} ({}): {} samples of 1x{}x{}, {} classes, normalised with mean {:.4f} std {:.4f}", directory,
                  split_name(split), count, rows, cols, classes, stats.mean[0], stats.std[0]);
  return labelled_images(std::move(description), std::move(image_tensor), std::move(label_tensor), stats, classes);
}

}  // namespace mgtrain
