// The receiving side of snapshot replication: the snapshots a buddy node's launcher sends (replica_sender.hpp), kept
// in stores of this launcher's (checkpoint/snapshot_store.hpp: memfds, two slots, so a snapshot cut off half way
// leaves the previous one whole), one per rank they come from, for this launcher's lifetime: when their node is lost,
// they are the copy that is left. A snapshot counts once its last part arrived and its image verifies.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/snapshot_store.hpp"
#include "checkpoint/snapshot_stores.hpp"
#include "replicate/snapshot_part.hpp"
#include "util/fd.hpp"

namespace mgtrain {

class ReplicaStores {
 public:
  // `max_bytes`: the largest snapshot taken (a larger one is refused, with a note). The stores' memfds are `stores`'
  // (checkpoint/snapshot_stores.hpp: replica_fd), which hands them to the workers; it outlives this object.
  ReplicaStores(SnapshotStores& stores, std::uint64_t max_bytes) : stores_(stores), max_bytes_(max_bytes) {}

  // A part that arrived from `peer` ("10.77.0.2:40112"). What is worth a line goes into `notes`: a snapshot refused
  // (too large) or that did not verify. Parts that do not continue the snapshot being received are dropped.
  void take(const SnapshotPart& part, const std::string& peer, std::vector<std::string>& notes);

  // The newest complete replica of each rank.
  struct Held {
    int rank = 0;
    std::int64_t step = 0;
    std::int64_t time_ms = 0;      // when the rank took it
    std::int64_t received_ms = 0;  // when its last part arrived here
    std::string origin;            // the node it came from
  };
  std::vector<Held> held() const;
  long long received() const { return received_; }  // snapshots received whole and verified
  long long damaged() const { return damaged_; }    // received whole, but the image did not verify
  long long dropped_parts() const { return dropped_; }
  std::uint64_t bytes() const;  // the memory the stores hold

 private:
  struct Replica {
    int fd = -1;
    std::unique_ptr<SnapshotStore> store;
    bool receiving = false;  // a snapshot is arriving: the fields below are its
    std::uint64_t generation = 0;
    std::int64_t step = 0;
    std::int64_t time_ms = 0;
    std::uint64_t total = 0;
    std::uint64_t next = 0;
    unsigned char* room = nullptr;
    bool has_held = false;
    Held held;
  };
  Replica& replica(int rank);

  SnapshotStores& stores_;
  std::uint64_t max_bytes_;
  std::map<int, Replica> by_rank_;
  long long received_ = 0;
  long long damaged_ = 0;
  long long dropped_ = 0;
};

}  // namespace mgtrain
