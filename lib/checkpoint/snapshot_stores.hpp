// The snapshot stores of a node's workers (docs/checkpoints.md#snapshots-in-memory): one memfd per local rank
// (checkpoint/snapshot_store.hpp), made when that rank's first worker starts and kept for the launcher's lifetime, so
// that a restarted worker (a new attempt, or a new round of a multi-node job) finds what its predecessor wrote; a
// worker's crash cannot reach it. Each worker inherits its own under the number MGTRAIN_SNAPSHOT_FD names.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "util/fd.hpp"

namespace mgtrain {

class SnapshotStores {
 public:
  // The descriptor of `local_rank`'s store (made on first use, close-on-exec: the worker's start passes it on).
  // Throws SystemError when memfd_create fails.
  int fd_for(int local_rank);

  // The memory all stores hold, in bytes.
  std::uint64_t bytes() const;

  // The store of the replicas of `rank`'s snapshots, which the node before this one in the ring sends
  // (replicate/replica_stores.hpp fills it): made on first use, close-on-exec, kept like the workers' own. Local rank
  // 0's worker inherits every one (MGTRAIN_SNAPSHOT_REPLICAS), to resume from when no newer snapshot is left.
  int replica_fd(int rank);
  // Every replica store made so far, by rank: (rank, descriptor).
  std::vector<std::pair<int, int>> replica_fds() const;
  // The memory the replica stores hold, in bytes.
  std::uint64_t replica_bytes() const;

 private:
  std::vector<Fd> fds_;         // by local rank; an invalid Fd: not made yet
  std::map<int, Fd> replicas_;  // by the global rank they come from
};

}  // namespace mgtrain
