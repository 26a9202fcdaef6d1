// A snapshot part on the wire (see snapshot_part.hpp).
#include "replicate/snapshot_part.hpp"

#include <fmt/format.h>

namespace mgtrain {

rdzv::Message SnapshotPart::to_message() const {
  rdzv::Message m = rdzv::Message::of(rdzv::MessageType::kSnapshotPart);
  m.set("rank", rank).set("round", round).set("origin", origin).set("step", static_cast<long long>(step));
  m.set("generation", static_cast<long long>(generation)).set("time_ms", static_cast<long long>(time_ms));
  m.set("total", static_cast<long long>(total)).set("offset", static_cast<long long>(offset)).set("data", data);
  return m;
}

SnapshotPart SnapshotPart::from(const rdzv::Message& m) {
  if (m.type != rdzv::MessageType::kSnapshotPart) {
    throw rdzv::ProtocolError("expected a snapshot-part message, got " + rdzv::type_name(m.type));
  }
  auto non_negative = [&](const char* name) {
    const long long value = m.integer(name);
    if (value < 0) throw rdzv::ProtocolError(fmt::format("snapshot-part message: {} is {}", name, value));
    return value;
  };
  SnapshotPart part;
  part.rank = static_cast<int>(non_negative("rank"));
  part.round = static_cast<int>(non_negative("round"));
  part.origin = m.text("origin");
  part.step = non_negative("step");
  part.generation = static_cast<std::uint64_t>(non_negative("generation"));
  part.time_ms = non_negative("time_ms");
  part.total = static_cast<std::uint64_t>(non_negative("total"));
  part.offset = static_cast<std::uint64_t>(non_negative("offset"));
  part.data = m.text("data");
  if (m.integer("rank") > (1 << 24) || m.integer("round") > (1 << 30)) {
    throw rdzv::ProtocolError("snapshot-part message: rank or round out of range");
  }
  if (part.data.empty() || part.data.size() > kSnapshotPartBytes || part.offset > part.total ||
      part.data.size() > part.total - part.offset) {
    throw rdzv::ProtocolError(fmt::format("snapshot-part message: {} bytes at offset {} of a {}-byte snapshot",
                                          part.data.size(), part.offset, part.total));
  }
  return part;
}

}  // namespace mgtrain
