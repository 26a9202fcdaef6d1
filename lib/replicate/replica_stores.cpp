// The receiving side of snapshot replication (see replica_stores.hpp).
#include "replicate/replica_stores.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "checkpoint/checkpoint_file.hpp"
#include "util/error.hpp"
#include "util/time_format.hpp"

namespace mgtrain {
namespace {

// The Python helper's images (share/mgtrain/python/mgtrain_snapshot.py): "MGPYSNP2", the payload's length (u64), its
// CRC-32 (u32) and the writer's rank (i32), little-endian, then the payload.
constexpr char kPythonImageMagic[8] = {'M', 'G', 'P', 'Y', 'S', 'N', 'P', '2'};
constexpr std::uint64_t kPythonImageHead = 24;

// Throws Error saying what is wrong when the image (the built-in trainer's or the Python helper's) does not verify.
void verify_image(const std::string& what, const unsigned char* data, std::uint64_t size) {
  if (size >= kPythonImageHead && std::memcmp(data, kPythonImageMagic, sizeof kPythonImageMagic) == 0) {
    std::uint64_t length = 0;
    std::uint32_t crc = 0;
    std::memcpy(&length, data + 8, sizeof length);
    std::memcpy(&crc, data + 16, sizeof crc);
    if (length != size - kPythonImageHead) {
      throw Error(fmt::format("{}: its payload says {} bytes, it has {}", what, length, size - kPythonImageHead));
    }
    uLong computed = ::crc32(0L, Z_NULL, 0);
    for (std::uint64_t at = 0; at < length;) {  // zlib takes 32-bit lengths
      const auto piece = static_cast<uInt>(std::min<std::uint64_t>(length - at, 1U << 30));
      computed = ::crc32(computed, data + kPythonImageHead + at, piece);
      at += piece;
    }
    if (computed != crc)
      throw Error(fmt::format("{}: checksum mismatch: stored {:08x}, computed {:08x}", what, crc, computed));
    return;
  }
  (void)read_checkpoint_image(what, data, size);
}

}  // namespace

ReplicaStores::Replica& ReplicaStores::replica(int rank) {
  Replica& replica = by_rank_[rank];
  if (!replica.store) {
    replica.fd = stores_.replica_fd(rank);
    replica.store = std::make_unique<SnapshotStore>(replica.fd, fmt::format("the replica of rank {}", rank));
  }
  return replica;
}

void ReplicaStores::take(const SnapshotPart& part, const std::string& peer, std::vector<std::string>& notes) {
  if (part.offset == 0) {
    if (part.total > max_bytes_) {
      ++dropped_;
      notes.push_back(
          fmt::format("refused the snapshot of rank {} (step {}) from {} ({}): {} bytes, more than the "
                      "{} this node takes",
                      part.rank, part.step, part.origin, peer, part.total, max_bytes_));
      by_rank_[part.rank].receiving = false;
      return;
    }
    Replica& r = replica(part.rank);
    r.room = r.store->begin_write(part.total);
    r.receiving = true;
    r.generation = part.generation;
    r.step = part.step;
    r.time_ms = part.time_ms;
    r.total = part.total;
    r.next = 0;
  }
  auto it = by_rank_.find(part.rank);
  if (it == by_rank_.end() || !it->second.receiving || it->second.generation != part.generation ||
      it->second.total != part.total || it->second.next != part.offset) {
    ++dropped_;
    return;
  }
  Replica& r = it->second;
  std::memcpy(r.room + part.offset, part.data.data(), part.data.size());
  r.next += part.data.size();
  if (r.next < r.total) return;
  r.receiving = false;
  const std::string what = fmt::format("the snapshot of rank {} (step {}) from {}", part.rank, part.step, part.origin);
  try {
    verify_image(what, r.room, r.total);  // its checksum: torn on the way, it is not kept
  } catch (const Error& error) {
    ++damaged_;
    notes.push_back(fmt::format("dropped {}: {}", what, error.what()));
    return;
  }
  r.store->complete_write(r.step, r.time_ms);
  ++received_;
  r.has_held = true;
  r.held = Held{part.rank, r.step, r.time_ms, std::llround(unix_seconds_now() * 1000), part.origin};
}

std::vector<ReplicaStores::Held> ReplicaStores::held() const {
  std::vector<Held> held;
  for (const auto& [rank, replica] : by_rank_) {
    if (replica.has_held) held.push_back(replica.held);
  }
  return held;
}

std::uint64_t ReplicaStores::bytes() const { return stores_.replica_bytes(); }

}  // namespace mgtrain
