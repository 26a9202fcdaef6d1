// The sending side of snapshot replication (see replica_sender.hpp).
#include "replicate/replica_sender.hpp"

#include <sys/stat.h>

#include <algorithm>

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {

void ReplicaSender::set_round(int round, const std::string& origin, const std::vector<Source>& sources) {
  round_ = round;
  origin_ = origin;
  for (const Source& source : sources) {
    auto it = std::find_if(stores_.begin(), stores_.end(), [&](const Store& s) { return s.fd == source.fd; });
    if (it == stores_.end()) {
      stores_.push_back(Store{source.fd, source.rank, nullptr, 0});
    } else {
      it->rank = source.rank;
    }
  }
}

void ReplicaSender::restart() {
  if (transfer_) transfer_->offset = 0;
}

SnapshotStore* ReplicaSender::open(Store& store) {
  if (store.store) return store.store.get();
  struct stat info {};
  // Not before the worker has written the header: the launcher never writes into a store it did not fill.
  if (::fstat(store.fd, &info) != 0 || static_cast<std::uint64_t>(info.st_size) < SnapshotStore::kHeaderBytes) {
    return nullptr;
  }
  try {
    store.store = std::make_unique<SnapshotStore>(store.fd, fmt::format("the snapshot store of rank {}", store.rank));
  } catch (const Error&) {
    return nullptr;  // not a store of this layout: nothing to send (the worker says why when it reads it)
  }
  return store.store.get();
}

std::optional<ReplicaSender::Transfer> ReplicaSender::start_next() {
  for (std::size_t i = 0; i < stores_.size(); ++i) {
    const std::size_t index = (turn_ + i) % stores_.size();
    Store& store = stores_[index];
    SnapshotStore* snapshots = open(store);
    if (!snapshots) continue;
    const std::optional<SnapshotStore::Latest> latest = snapshots->latest();
    if (!latest || latest->generation <= store.sent_generation || latest->bytes == 0) continue;
    if (whole_state_ && latest->step <= newest_started_step_) {  // another rank's copy of that step went already
      ++counters_.passed_over;
      store.sent_generation = latest->generation;
      continue;
    }
    if (store.sent_generation > 0)
      counters_.skipped += static_cast<long long>(latest->generation - store.sent_generation - 1);
    store.sent_generation = latest->generation;
    newest_started_step_ = std::max(newest_started_step_, latest->step);
    turn_ = (index + 1) % stores_.size();
    return Transfer{index, latest->slot, latest->generation, latest->step, latest->written_unix_ms, latest->bytes, 0};
  }
  return std::nullopt;
}

std::optional<SnapshotPart> ReplicaSender::next() {
  if (!transfer_) transfer_ = start_next();
  while (transfer_) {
    Store& store = stores_[transfer_->store];
    const std::optional<SnapshotStore::Latest> contents = store.store->contents(transfer_->slot);
    if (contents && contents->generation == transfer_->generation && contents->bytes == transfer_->total) {
      SnapshotPart part;
      part.rank = store.rank;
      part.round = round_;
      part.origin = origin_;
      part.step = transfer_->step;
      part.generation = transfer_->generation;
      part.time_ms = transfer_->time_ms;
      part.total = transfer_->total;
      part.offset = transfer_->offset;
      const std::uint64_t size = std::min<std::uint64_t>(kSnapshotPartBytes, transfer_->total - transfer_->offset);
      part.data.assign(reinterpret_cast<const char*>(contents->data + transfer_->offset), size);
      // The copy counts only if the slot still held this snapshot after it (else the worker began to overwrite it).
      if (store.store->holds(transfer_->slot, transfer_->generation)) {
        transfer_->offset += size;
        counters_.bytes += size;
        if (part.last()) {
          ++counters_.sent;
          if (transfer_->step >= counters_.newest_step) {
            counters_.newest_step = transfer_->step;
            counters_.newest_time_ms = transfer_->time_ms;
          }
          transfer_.reset();
        }
        return part;
      }
    }
    ++counters_.skipped;  // overwritten while in flight: the link is slower than the snapshots
    transfer_ = start_next();
  }
  return std::nullopt;
}

}  // namespace mgtrain
