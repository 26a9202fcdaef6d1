// One piece of a snapshot in memory on its way to the buddy node's launcher (rdzv::MessageType::kSnapshotPart, on the
// two agents' own connection: snapshot_replication.hpp). A snapshot travels in order as parts of at most
// kSnapshotPartBytes: the part at offset 0 starts it, the one that reaches `total` ends it; the receiver verifies the
// whole image (its checksum) before it counts. Pure: no sockets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "wire/rendezvous_message.hpp"

namespace mgtrain {

// A part's bytes: below the frame's 1 MiB payload with room for the other fields.
inline constexpr std::size_t kSnapshotPartBytes = 1000 * 1024;

struct SnapshotPart {
  int rank = 0;                  // the global rank whose store it comes from, in the sender's round
  int round = 0;                 // the sender's round
  std::string origin;            // the sender's node, "node 1 (hostB, 10.77.0.2)"
  std::int64_t step = 0;         // the snapshot's step
  std::uint64_t generation = 0;  // its generation in the sender's store: another one starts another snapshot
  std::int64_t time_ms = 0;      // when the rank completed it (Unix milliseconds)
  std::uint64_t total = 0;       // the image's bytes
  std::uint64_t offset = 0;      // where `data` goes in it
  std::string data;

  bool last() const { return offset + data.size() == total; }
  rdzv::Message to_message() const;
  // Throws rdzv::ProtocolError naming the field that is missing or out of range.
  static SnapshotPart from(const rdzv::Message& message);
};

}  // namespace mgtrain
