// Reading and validating CIFAR-10 binary batches into an in-memory data set (see cifar10_data.hpp).
#include "train/data/cifar10_data.hpp"

#include <cstring>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "train/data/data_file.hpp"
#include "train/data/image_normalization.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

constexpr int64_t kSide = 32;
constexpr int64_t kPixels = 3 * kSide * kSide;
constexpr int64_t kRecord = 1 + kPixels;
constexpr int64_t kClasses = 10;

std::vector<std::string> batch_names(Split split) {
  if (split == Split::Test) return {"test_batch.bin"};
  std::vector<std::string> names;
  for (int i = 1; i <= 5; ++i) names.push_back(fmt::format("data_batch_{}.bin", i));
  return names;
}

// The records of every batch file of `split`, checked: whole records only, labels in 0..9.
std::vector<uint8_t> read_records(const std::string& directory, Split split) {
  std::vector<uint8_t> all;
  for (const auto& name : batch_names(split)) {
    const std::string path = find_data_file(directory, name);
    std::vector<uint8_t> bytes = read_data_file(path);
    const int64_t size = static_cast<int64_t>(bytes.size());
    if (size == 0 || size % kRecord != 0) {
      throw UsageError(fmt::format(
          "{}: size {} bytes is not a positive multiple of the {}-byte CIFAR-10 record "
          "(1 label byte + 3x32x32 pixel bytes){}",
          path, size, kRecord,
          size % kRecord ? fmt::format("; {} bytes left over after {} records", size % kRecord, size / kRecord) : ""));
    }
    for (int64_t r = 0; r < size / kRecord; ++r) {
      const int label = bytes[r * kRecord];
      if (label >= kClasses) {
        throw UsageError(fmt::format(
            "{}: record {} has label {}; CIFAR-10 labels are 0..9 (is this the CIFAR-100 format?)", path, r, label));
      }
    }
    all.insert(all.end(), bytes.begin(), bytes.end());
  }
  return all;
}

}  // namespace

std::unique_ptr<DataSource> open_cifar10_data(const std::string& directory, Split split) {
  const std::vector<uint8_t> records = read_records(directory, split);
  const int64_t count = static_cast<int64_t>(records.size()) / kRecord;
  at::Tensor images = at::empty({count, 3, kSide, kSide}, at::kByte);
  at::Tensor labels = at::empty({count}, at::kLong);
  uint8_t* image_out = images.data_ptr<uint8_t>();
  int64_t* label_out = labels.data_ptr<int64_t>();
  for (int64_t r = 0; r < count; ++r) {
    label_out[r] = records[r * kRecord];
    std::memcpy(image_out + r * kPixels, records.data() + r * kRecord + 1, kPixels);
  }
  ChannelStats stats;
  if (split == Split::Train) {
    stats = channel_stats(image_out, count, 3, kSide * kSide);
  } else {
    const std::vector<uint8_t> train = read_records(directory, Split::Train);
    const int64_t train_count = static_cast<int64_t>(train.size()) / kRecord;
    std::vector<uint8_t> pixels(static_cast<size_t>(train_count * kPixels));
    for (int64_t r = 0; r < train_count; ++r)
      std::memcpy(pixels.data() + r * kPixels, train.data() + r * kRecord + 1, kPixels);
    stats = channel_stats(pixels.data(), train_count, 3, kSide * kSide);
  }
  std::string description = fmt::format(
      "cifar10 {} ({}): {} samples of 3x32x32, 10 classes, normalised with mean {:.4f},{:.4f},{:.4f} std "
      "{:.4f},{:.4f},{:.4f}",
      directory, split_name(split), count, stats.mean[0], stats.mean[1], stats.mean[2], stats.std[0], stats.std[1],
      stats.std[2]);
  return labelled_images(std::move(description), std::move(images), std::move(labels), stats, kClasses);
}

}  // namespace mgtrain
