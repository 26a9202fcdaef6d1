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

  // This rank's sample indices for `epoch`, in order; samples_per_rank() of them. Equal to indices_after(epoch, 0).
  std::vector<int64_t> indices(int64_t epoch) const;

  // Mid-epoch resume, possibly with another world size. `consumed` = how many positions of the epoch's global order
  // were already trained on: with W ranks of per-rank batch B, after b micro-batches every rank has taken b*B samples
  // and together they took exactly positions [0, b*B*W) (rank r takes r, r+W, ...), so consumed = b*B*W.
  // The remainder is the order's positions consumed..N-1 (L = N - consumed of them; none when consumed >= N), and this
  // sampler's W' ranks share it by PyTorch's rule applied to the remainder:
  //  samples_per_rank_after = drop_last ? floor(L / W') : ceil(L / W')
  //  drop_last: the remainder is cut to samples_per_rank_after * W' positions (at most W' - 1 samples dropped);
  //  otherwise it is padded to that length by continuing the epoch's order cyclically: remaining position i is
  //  order[(consumed + i) mod N], so the padding repeats the epoch's order from its start — exactly how indices()
  //  pads the whole epoch;
  //  rank r' takes remaining positions r', r'+W', r'+2W', ...
  // So every remaining sample is seen exactly once (padding aside), all ranks get the same count, and with W' equal to
  // the W that consumed the first positions the result is exactly indices(epoch) from position b*B on — also where
  // the epoch is padded. Throws UsageError for consumed < 0.
  std::vector<int64_t> indices_after(int64_t epoch, int64_t consumed) const;
  // How many indices indices_after(epoch, consumed) returns (the same on every rank).
  int64_t samples_per_rank_after(int64_t consumed) const;
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

  std::vector<int64_t> epoch_order(int64_t epoch) const;
};

}  // namespace mgtrain
