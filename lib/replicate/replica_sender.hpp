// What a node's launcher sends its buddy, part by part (snapshot_replication.hpp carries the parts): the newest
// complete snapshot of each of its workers' stores (checkpoint/snapshot_store.hpp), the stores taken in turn. One
// snapshot is in flight at a time, and it is read straight from the store while the worker trains on: a worker's next
// snapshot goes into the other slot, so the one in flight is overwritten only by the snapshot after that. When that
// happens (the link is slower than the snapshots) the snapshot in flight is given up and counted as skipped, as is
// every snapshot that completed and was overtaken by a newer one before it could be sent. Training never waits.
// When every rank's snapshot holds the whole job's state (the built-in trainer's), one copy per step is enough: a
// store's snapshot of a step already started from another store is passed over (not counted as skipped).
// No sockets: the caller asks for the next part whenever its connection has taken the last one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/snapshot_store.hpp"
#include "replicate/snapshot_part.hpp"

namespace mgtrain {

class ReplicaSender {
 public:
  // `whole_state`: every rank's snapshot holds the whole state (send one per step); else each rank's is its own.
  explicit ReplicaSender(bool whole_state = false) : whole_state_(whole_state) {}
  // A local rank's store (the launcher's descriptor) and the global rank it has in this round.
  struct Source {
    int rank = 0;
    int fd = -1;
  };
  // A round begins: this node's name and stores. A store seen before keeps what was sent of it; the snapshot in
  // flight goes on (its store is the same memory).
  void set_round(int round, const std::string& origin, const std::vector<Source>& sources);
  // The next part to send, if any: the rest of the snapshot in flight, else the start of the next newer one.
  std::optional<SnapshotPart> next();
  // The connection was lost: the snapshot in flight starts again from its first part on the next connection.
  void restart();

  struct Counters {
    long long sent = 0;             // snapshots sent whole
    long long skipped = 0;          // snapshots not sent: overtaken before their turn, or overwritten while in flight
    long long passed_over = 0;      // whole_state: another store's copy of a step that was sent from one already
    std::uint64_t bytes = 0;        // bytes of the parts handed out
    std::int64_t newest_step = -1;  // the newest snapshot sent whole: its step and when it was taken (Unix ms)
    std::int64_t newest_time_ms = 0;
  };
  const Counters& counters() const { return counters_; }
  bool in_flight() const { return transfer_.has_value(); }

 private:
  struct Store {
    int fd = -1;
    int rank = 0;
    std::unique_ptr<SnapshotStore> store;  // opened once the worker gave it its header
    std::uint64_t sent_generation = 0;     // the newest generation started (0: none yet)
  };
  struct Transfer {
    std::size_t store = 0;
    int slot = 0;
    std::uint64_t generation = 0;
    std::int64_t step = 0;
    std::int64_t time_ms = 0;
    std::uint64_t total = 0;
    std::uint64_t offset = 0;
  };
  std::optional<Transfer> start_next();
  SnapshotStore* open(Store& store);

  bool whole_state_;
  std::int64_t newest_started_step_ = -1;  // whole_state: the newest step a transfer started with
  int round_ = 0;
  std::string origin_;
  std::vector<Store> stores_;
  std::optional<Transfer> transfer_;
  std::size_t turn_ = 0;  // the store looked at first next time (each in turn)
  Counters counters_;
};

}  // namespace mgtrain
