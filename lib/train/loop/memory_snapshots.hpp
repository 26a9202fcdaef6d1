// Snapshots in memory (docs/checkpoints.md#snapshots-in-memory): every checkpoint.snapshot_every steps each rank
// writes the whole training state (checkpoint_content.hpp: the image of a checkpoint file, every rank's RNG streams
// included, so one snapshot is enough to resume the whole job) into the store its launcher keeps for it across
// restarts (MGTRAIN_SNAPSHOT_FD; checkpoint/snapshot_store.hpp). Training waits only for the copy into that memory:
// no disk, no thread. A restart asks survey() for the newest snapshot any rank holds; restore() resumes every rank
// from it: from its own copy, or, for a rank that lacks it (killed mid-write, a new node), the copy of the lowest rank
// that holds it, sent over the process group. A node's local rank 0 also reads the replicas its launcher holds of the
// node before it in the ring (MGTRAIN_SNAPSHOT_REPLICAS; replicate/): a replica is used only when it is newer than
// every rank's own snapshot, as when a node was lost with the only copy of a newer state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "checkpoint/snapshot_store.hpp"
#include "config/config.hpp"
#include "train/loop/checkpoint_content.hpp"
#include "train/parallel/communicator.hpp"
#include "train/state/train_state.hpp"
#include "util/fd.hpp"

namespace mgtrain {

class MemorySnapshots {
 public:
  // Opens the store MGTRAIN_SNAPSHOT_FD names, when checkpoint.snapshot_every > 0 (a value that is not an open
  // snapshot store is an Error naming the variable). Nothing collective yet.
  MemorySnapshots(const CheckpointConfig& config, CheckpointContent& content, Communicator& comm);
  ~MemorySnapshots();
  MemorySnapshots(const MemorySnapshots&) = delete;
  MemorySnapshots& operator=(const MemorySnapshots&) = delete;

  // The newest snapshot the job holds: its step, whether every rank holds it, and the lowest rank that does.
  struct Newest {
    std::int64_t step = 0;
    bool everywhere = false;
    int holder = 0;
    int replica_of = -1;  // the holder sends its replica of this rank's snapshot; -1: its own snapshot
  };
  // Collective (before anything else here): which ranks have a store and what each holds; a damaged snapshot is
  // skipped (the rank that holds it says which and why). Nothing when no rank holds one, or snapshots are off.
  std::optional<Newest> survey();

  // Collective: every rank restores from the snapshot survey() found; returns where training continues.
  TrainPosition restore(const Newest& newest);

  // After survey(): the newest snapshot this rank's own store holds (its step, the Unix seconds it was completed).
  struct Held {
    std::int64_t step = 0;
    double unix_time = 0;
  };
  std::optional<Held> held() const;

  // After survey(): snapshots are taken (checkpoint.snapshot_every > 0 and some rank has a store).
  bool on() const { return on_; }
  // Whether a snapshot is due after `step`.
  bool due(std::int64_t step) const { return on_ && step % every_ == 0; }
  // Collective: writes the snapshot of `at` into this rank's store (nothing to write on a rank without one). Whether
  // this rank's store now holds it.
  bool take(const TrainPosition& at);
  // Whether the next take() prints a line (rank 0's first snapshot: its size and time), for the progress bar to make
  // room.
  bool take_prints() const;

 private:
  std::string describe(const Newest& newest) const;

  std::int64_t every_;
  CheckpointContent& content_;
  Communicator& comm_;
  Fd fd_;
  std::unique_ptr<SnapshotStore> store_;
  std::optional<SnapshotStore::Snapshot> mine_;  // survey(): this rank's newest
  struct Replica {
    int rank = 0;  // whose snapshots it holds
    Fd fd;
    std::unique_ptr<SnapshotStore> store;
  };
  std::vector<Replica> replicas_;                        // MGTRAIN_SNAPSHOT_REPLICAS (local rank 0)
  std::optional<SnapshotStore::Snapshot> best_replica_;  // survey(): the newest replica, when newer than mine_
  int best_replica_rank_ = -1;
  bool on_ = false;
  bool announced_ = false;                     // rank 0 said what the first snapshot cost
  StateSnapshot staging_;                      // GPU tensors on their way into the store
  std::optional<std::int64_t> pause_at_step_;  // MGTRAIN_TEST_SNAPSHOT_PAUSE_AT_STEP, for tests only
  std::string pause_file_;                     // MGTRAIN_TEST_SNAPSHOT_PAUSE_FILE, for benchmarks only
};

}  // namespace mgtrain
