// Intra-node all-reduce through POSIX shared memory, for jobs whose ranks all run on one machine, one node's or several
// nodes' (the CPU counterpart of NCCL's intra-node path; ranks on other machines find rank 0's segment missing from
// their /dev/shm, or made by another kernel, and every rank then uses Gloo). Rank 0 creates one segment, every rank
// maps it, and it is unlinked as soon as all have mapped it, so nothing is left in /dev/shm even when a process is
// killed. Operations run asynchronously, strictly in issue order, on one background thread per process; the caller gets
// a c10d::Work handle whose wait() completes (or rethrows the thread's error), like Gloo's. Ranks synchronise through a
// generation counter per rank in the segment (atomics + futex wait/wake); a peer that does not arrive within the
// collective timeout fails the operation with an error naming it. Buffers allocated here (the gradient buckets) live in
// shared memory themselves and are summed in place, each rank adding up 1/world of the elements: no copies at all. Set
// MGTRAIN_SHM_ALLREDUCE=0 to disable (every rank then uses Gloo).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "train/torch/torch_compat.hpp"

namespace c10d {
class Store;
}

namespace mgtrain {

class ShmAllreduce {
 public:
  // Collective over the store: every rank of the job must call it. Returns nullptr on every rank when the
  // path is disabled (MGTRAIN_SHM_ALLREDUCE=0 on any rank) or any rank could not map the segment; throws
  // when a peer does not answer within `connect_timeout_s`. `run_tag` keeps concurrent jobs apart.
  // The store is kept for allocate_buffer().
  static std::unique_ptr<ShmAllreduce> connect(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                                               const std::string& run_tag, double connect_timeout_s, double timeout_s);
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  // Whether a tensor can take this path: a CPU float32/float64 tensor (the same answer on every rank).
  static bool supports(const at::Tensor& tensor);
  // Sum over ranks, in place; returns at once. Operations complete in the order they were issued.
  // A tensor from allocate_buffer() is summed without copies (see ShmReduceGroup::allreduce_sum_shared).
  torch_compat::WorkHandle allreduce_sum_async(const at::Tensor& tensor);
  // Collective: a zero-filled 1-D tensor of `numel` elements of `type` (float or double) living in shared
  // memory that every rank can read, so allreduce_sum_async on it needs no copy in or out. Undefined on every
  // rank when the memory could not be had (the caller then allocates normally).
  at::Tensor allocate_buffer(std::int64_t numel, c10::ScalarType type);

  class Impl;

 private:
  explicit ShmAllreduce(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgtrain
