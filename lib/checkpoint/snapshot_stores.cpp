// One snapshot store per local rank, kept across restarts (see snapshot_stores.hpp).
#include "checkpoint/snapshot_stores.hpp"

#include <sys/stat.h>

#include <string>

#include "checkpoint/snapshot_store.hpp"

namespace mgtrain {

int SnapshotStores::fd_for(int local_rank) {
  const auto index = static_cast<std::size_t>(local_rank);
  if (fds_.size() <= index) fds_.resize(index + 1);
  if (!fds_[index]) fds_[index] = SnapshotStore::create("mgtrain-snapshots-local-rank-" + std::to_string(local_rank));
  return fds_[index].get();
}

int SnapshotStores::replica_fd(int rank) {
  Fd& fd = replicas_[rank];
  if (!fd) fd = SnapshotStore::create("mgtrain-replica-rank-" + std::to_string(rank));
  return fd.get();
}

std::vector<std::pair<int, int>> SnapshotStores::replica_fds() const {
  std::vector<std::pair<int, int>> fds;
  for (const auto& [rank, fd] : replicas_) fds.emplace_back(rank, fd.get());
  return fds;
}

namespace {

// The memory a store's memfd holds (its pages, not its size: a slot's region is allocated as it is written).
std::uint64_t allocated_bytes(const Fd& fd) {
  struct stat info {};
  return fd && ::fstat(fd.get(), &info) == 0 ? static_cast<std::uint64_t>(info.st_blocks) * 512 : 0;
}

}  // namespace

std::uint64_t SnapshotStores::bytes() const {
  std::uint64_t total = 0;
  for (const Fd& fd : fds_) total += allocated_bytes(fd);
  return total;
}

std::uint64_t SnapshotStores::replica_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [rank, fd] : replicas_) total += allocated_bytes(fd);
  return total;
}

}  // namespace mgtrain
