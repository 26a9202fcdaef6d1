// Per-channel mean and standard deviation of 8-bit images, the gather of normalised float samples
// ((x/255 - mean) / std) from uint8 images, and the data source of labelled images: shared by the mnist and cifar10
// data sets.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace mgtrain {

struct ChannelStats {
  std::vector<double> mean;  // of x/255, one per channel
  std::vector<double> std;
};

// Statistics of `pixels` laid out as [N, channels, plane] (plane = H*W bytes per channel).
ChannelStats channel_stats(const uint8_t* pixels, int64_t samples, int64_t channels, int64_t plane);

// Turns bytes into normalised floats through a 256-entry table per channel.
class ImageNormalizer {
 public:
  explicit ImageNormalizer(const ChannelStats& stats);
  // images_u8[indices] of a contiguous uint8 [N, C, H, W] tensor as float32 [B, C, H, W], normalised. Checks indices.
  at::Tensor gather(const at::Tensor& images_u8, const std::vector<int64_t>& indices) const;

 private:
  std::vector<std::array<float, 256>> tables_;  // per channel
};

class DataSource;
// The data source of labelled 8-bit images: `images` contiguous uint8 [N, C, H, W], `labels` int64 [N] in
// [0, classes); batches are normalised with `stats`.
std::unique_ptr<DataSource> labelled_images(std::string description, at::Tensor images, at::Tensor labels,
                                            const ChannelStats& stats, int64_t classes);

}  // namespace mgtrain
