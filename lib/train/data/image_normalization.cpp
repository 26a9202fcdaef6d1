// Per-channel image statistics from byte histograms, and normalisation of gathered batches.
#include "train/data/image_normalization.hpp"

#include "train/data/data_source.hpp"

#include <cmath>

#include <ATen/ATen.h>

namespace mgtrain {

ChannelStats channel_stats(const uint8_t* pixels, int64_t samples, int64_t channels, int64_t plane) {
  ChannelStats stats;
  for (int64_t c = 0; c < channels; ++c) {
    std::array<uint64_t, 256> histogram{};
    for (int64_t i = 0; i < samples; ++i) {
      const uint8_t* p = pixels + (i * channels + c) * plane;
      for (int64_t j = 0; j < plane; ++j) ++histogram[p[j]];
    }
    double count = 0, sum = 0, sum_sq = 0;
    for (int v = 0; v < 256; ++v) {
      const double x = v / 255.0, n = static_cast<double>(histogram[v]);
      count += n;
      sum += n * x;
      sum_sq += n * x * x;
    }
    const double mean = count > 0 ? sum / count : 0.0;
    const double var = count > 0 ? sum_sq / count - mean * mean : 0.0;
    stats.mean.push_back(mean);
    // A constant image set would divide by zero; fall back to 1 so inputs are just centred.
    stats.std.push_back(var > 1e-12 ? std::sqrt(var) : 1.0);
  }
  return stats;
}

ImageNormalizer::ImageNormalizer(const ChannelStats& stats) : tables_(stats.mean.size()) {
  for (size_t c = 0; c < tables_.size(); ++c) {
    for (int v = 0; v < 256; ++v) tables_[c][v] = static_cast<float>((v / 255.0 - stats.mean[c]) / stats.std[c]);
  }
}

at::Tensor ImageNormalizer::gather(const at::Tensor& images_u8, const std::vector<int64_t>& indices) const {
  check_sample_indices(indices, images_u8.size(0));
  const int64_t channels = images_u8.size(1), plane = images_u8.size(2) * images_u8.size(3);
  at::Tensor out =
      at::empty({static_cast<int64_t>(indices.size()), channels, images_u8.size(2), images_u8.size(3)}, at::kFloat);
  const uint8_t* in = images_u8.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  for (int64_t index : indices) {
    const uint8_t* sample = in + index * channels * plane;
    for (int64_t c = 0; c < channels; ++c) {
      const auto& table = tables_[c];
      for (int64_t j = 0; j < plane; ++j) *dst++ = table[sample[c * plane + j]];
    }
  }
  return out;
}

namespace {

class LabelledImages final : public DataSource {
 public:
  LabelledImages(std::string description, at::Tensor images, at::Tensor labels, const ChannelStats& stats,
                 int64_t classes)
      : description_(std::move(description)),
        images_(std::move(images)),
        labels_(std::move(labels)),
        normalizer_(stats),
        classes_(classes) {}

  int64_t size() const override { return images_.size(0); }
  std::vector<int64_t> sample_shape() const override { return {images_.size(1), images_.size(2), images_.size(3)}; }
  int64_t num_classes() const override { return classes_; }
  Batch make_batch(const std::vector<int64_t>& indices) const override {
    return Batch{normalizer_.gather(images_, indices), gather_rows(labels_, indices)};
  }
  std::string description() const override { return description_; }

 private:
  std::string description_;
  at::Tensor images_;  // uint8 [N, C, H, W]
  at::Tensor labels_;  // int64 [N]
  ImageNormalizer normalizer_;
  int64_t classes_;
};

}  // namespace

std::unique_ptr<DataSource> labelled_images(std::string description, at::Tensor images, at::Tensor labels,
                                            const ChannelStats& stats, int64_t classes) {
  return std::make_unique<LabelledImages>(std::move(description), std::move(images), std::move(labels), stats, classes);
}

}  // namespace mgtrain
