// The per-rank epoch order of sample indices (see distributed_sampler.hpp).
#include "train/data/distributed_sampler.hpp"

#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {

DistributedSampler::DistributedSampler(int64_t dataset_size, int world_size, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : dataset_size_(dataset_size),
      world_size_(world_size),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  if (world_size < 1) throw UsageError(fmt::format("sampler: world size {} must be at least 1", world_size));
  if (rank < 0 || rank >= world_size)
    throw UsageError(fmt::format("sampler: rank {} is outside [0, {})", rank, world_size));
  if (dataset_size < 0) throw UsageError(fmt::format("sampler: negative data set size {}", dataset_size));
  const int64_t w = world_size;
  if (drop_last && dataset_size % w != 0) {
    samples_per_rank_ = (dataset_size - w + w - 1) / w;  // ceil((N - W) / W), as Python computes it
    if (dataset_size < w) {
      throw UsageError(
          fmt::format("sampler: {} samples cannot give each of {} ranks a sample with drop_last", dataset_size, w));
    }
  } else {
    samples_per_rank_ = (dataset_size + w - 1) / w;
  }
}

std::vector<int64_t> DistributedSampler::evaluation_shard(int64_t dataset_size, int world_size, int rank) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw UsageError(fmt::format("sampler: rank {} is outside [0, {})", rank, world_size));
  }
  std::vector<int64_t> mine;
  for (int64_t i = rank; i < dataset_size; i += world_size) mine.push_back(i);
  return mine;
}

std::vector<int64_t> DistributedSampler::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(dataset_size_));
  if (shuffle_) {
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed_ + static_cast<uint64_t>(epoch));
    const at::Tensor permutation = at::randperm(dataset_size_, generator, at::kLong);
    const int64_t* p = permutation.data_ptr<int64_t>();
    std::copy(p, p + dataset_size_, order.begin());
  } else {
    for (int64_t i = 0; i < dataset_size_; ++i) order[i] = i;
  }
  return order;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const { return indices_after(epoch, 0); }

int64_t DistributedSampler::samples_per_rank_after(int64_t consumed) const {
  if (consumed < 0) throw UsageError(fmt::format("sampler: negative number of consumed samples {}", consumed));
  const int64_t remaining = std::max<int64_t>(dataset_size_ - consumed, 0);
  const int64_t w = world_size_;
  // Python's formulas on the remainder: for drop_last ceil((L - W) / W) when L % W != 0, i.e. floor(L / W).
  return drop_last_ ? remaining / w : (remaining + w - 1) / w;
}

std::vector<int64_t> DistributedSampler::indices_after(int64_t epoch, int64_t consumed) const {
  const int64_t per_rank = samples_per_rank_after(consumed);
  std::vector<int64_t> mine;
  if (per_rank == 0) return mine;
  const std::vector<int64_t> order = epoch_order(epoch);
  const int64_t total = per_rank * world_size_;
  mine.reserve(static_cast<size_t>(per_rank));
  // Remaining position i is order[(consumed + i) % N]: padding continues the order from its start.
  for (int64_t i = rank_; i < total; i += world_size_)
    mine.push_back(order[static_cast<size_t>((consumed + i) % dataset_size_)]);
  return mine;
}

}  // namespace mgtrain
