// The shared-memory segment behind the intra-node all-reduce (shm_allreduce.hpp): its rendezvous over the
// c10d store (local rank 0 creates it, the others map it, rank 0 unlinks it once everyone has), and the
// synchronous sum of one tensor across ranks through it.
//
// Layout: a header, one cache line of signals per rank, then two slots per rank (double buffering by the
// parity of the operation's generation). Tensors larger than a slot go through in slot-sized chunks, each
// chunk one generation. Per chunk: copy it into this rank's slot, publish the generation, wait until every
// rank published it (polling while that pays off, spin_budget.hpp, then a futex wait with the collective timeout), then
// sum all slots in rank order into the tensor, so every rank gets bit-identical results. Double buffering makes that
// one barrier enough: a rank that published generation g has finished reading the slots of generation g - 1.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

#include <ATen/core/Tensor.h>

#include "train/parallel/spin_budget.hpp"

namespace c10d {
class Store;
}

namespace mgtrain {

class ShmReduceGroup {
 public:
  // Collective; see ShmAllreduce::connect. Returns nullptr on every rank if any rank cannot take part.
  static std::unique_ptr<ShmReduceGroup> connect(c10d::Store& store, int rank, int world_size,
                                                 const std::string& run_tag, double connect_timeout_s,
                                                 double timeout_s);
  ~ShmReduceGroup();
  ShmReduceGroup(const ShmReduceGroup&) = delete;
  ShmReduceGroup& operator=(const ShmReduceGroup&) = delete;

  // Sums a contiguous CPU float/double tensor over ranks, in place. One thread at a time; every rank must
  // call it with the same sizes in the same order. Throws mgtrain::Error naming the ranks that did not arrive
  // within the timeout, or when abort() was called.
  void allreduce_sum(const at::Tensor& tensor);
  // From any thread: makes a waiting allreduce_sum (and every later one) throw instead of waiting.
  void abort();

  std::size_t slot_bytes() const { return slot_bytes_; }
  int rank() const { return rank_; }

  // Memory every rank can read and write: `bytes` per rank, each rank's region at the same index on all.
  struct SharedBuffer {
    void* mapping_base = nullptr;
    std::size_t mapping_length = 0;
    std::size_t bytes = 0;
    std::vector<char*> regions;  // by rank
    ~SharedBuffer();
  };
  // Collective (every rank, same order, same size): a new segment with one region per rank, zero-filled.
  // Returns nullptr on every rank when any rank cannot map it (e.g. /dev/shm is too small).
  std::shared_ptr<SharedBuffer> allocate_shared_buffer(c10d::Store& store, std::size_t bytes, double connect_timeout_s);
  // The zero-copy sum: every rank's region holds its `count` elements; afterwards every region holds the sum
  // over ranks (added in rank order, so bit-identical everywhere). Each rank sums 1/world of the elements
  // and writes them into all regions; two barriers (filled, summed) and no copy in or out.
  void allreduce_sum_shared(const SharedBuffer& buffer, c10::ScalarType type, std::int64_t count);

  // What lies at the start of the segment (defined in shm_segment.cpp).
  struct Header;
  struct RankSignal;

 private:
  ShmReduceGroup(void* base, std::size_t length, int rank, int world_size, std::size_t slot_bytes, double timeout_s,
                 std::string name_prefix);
  void publish(std::uint32_t generation);
  void wait_for_generation(std::uint32_t generation);
  // Throws when `peer`'s process is gone while we wait for it (checked every 100 ms of waiting).
  void check_peer_alive(int peer, std::uint32_t generation);
  void reduce_chunk(const at::Tensor& tensor, std::int64_t offset, std::int64_t count);
  RankSignal& signal(int rank) const;
  char* slot(int rank, std::uint32_t generation) const;

  void* base_;
  std::size_t length_;
  int rank_, world_;
  std::size_t slot_bytes_;
  double timeout_s_;
  std::uint32_t generation_ = 0;
  std::string name_prefix_;  // of this job's segment names in /dev/shm
  int buffers_allocated_ = 0;
  SpinBudget spin_;  // how long a wait for a peer polls before it sleeps, learnt from the waits so far
  std::vector<bool> peer_seen_alive_;
  std::atomic<bool> aborted_{false};
};

}  // namespace mgtrain
