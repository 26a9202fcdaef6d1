// Which samples each rank sees in an epoch: torch.utils.data.DistributedSampler's semantics, bit for bit.
#pragma once

#include <cstdint>
#include <vector>

namespace mgtrain {

// For N = dataset_size samples and W = world_size ranks:
//  samples_per_rank = drop_last && N % W != 0 ? ceil((N - W) / W) : ceil(N / W);  total = samples_per_rank * W
//  order = shuffle ? randperm(N) from a torch CPU generator seeded seed + epoch : 0..N-1
//  drop_last: order is cut to `total`; otherwise it is padded to `total` by repeating it from the start
//  rank r takes order[r], order[r + W], order[r + 2W], ...
// So shards are disjoint except for padding, every rank gets the same count, and the order changes with the epoch
// but is identical for every process given the same seed — the same indices Python's DistributedSampler yields.
class DistributedSampler {
 public:
  // Throws UsageError for world_size < 1, rank outside [0, world_size), dataset_size < 0, or (drop_last) fewer
  // samples than ranks.
  DistributedSampler(int64_t dataset_size, int world_size, int rank, bool shuffle, uint64_t seed, bool drop_last);

  // This rank's sample indices for `epoch`, in order; samples_per_rank() of them.
  std::vector<int64_t> indices(int64_t epoch) const;
  int64_t samples_per_rank() const { return samples_per_rank_; }
  int64_t total_size() const { return samples_per_rank_ * world_size_; }

  // For evaluation: rank, rank + W, rank + 2W, ... below N — every sample exactly once over all ranks, no padding,
  // so summed metrics are exact (ranks may differ by one sample).
  static std::vector<int64_t> evaluation_shard(int64_t dataset_size, int world_size, int rank);

 private:
  int64_t dataset_size_;
  int world_size_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t samples_per_rank_;
};

}  // namespace mgtrain
