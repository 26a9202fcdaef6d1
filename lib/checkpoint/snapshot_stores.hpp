// The snapshot stores of a node's workers (docs/checkpoints.md#snapshots-in-memory): one memfd per local rank
// (checkpoint/snapshot_store.hpp), made when that rank's first worker starts and kept for the launcher's lifetime, so
// that a restarted worker (a new attempt, or a new round of a multi-node job) finds what its predecessor wrote; a
// worker's crash cannot reach it. Each worker inherits its own under the number MGTRAIN_SNAPSHOT_FD names.
#pragma once

#include <cstdint>
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

 private:
  std::vector<Fd> fds_;  // by local rank; an invalid Fd: not made yet
};

}  // namespace mgtrain
