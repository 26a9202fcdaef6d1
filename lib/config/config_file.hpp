// Reading a config file with a bound: only a regular file (not a FIFO, device, socket or directory, which could block
// or never end) of at most kMaxConfigFileBytes is read, so `mgtrain config validate /dev/zero` or a FIFO ends at once
// with a UsageError (exit code 2) naming the file and the limit (docs/config.md, "Input limits").
#pragma once

#include <cstddef>
#include <string>

namespace mgtrain {

// 16 MiB: far above any real config (a few KiB), far below what would hurt the launcher.
inline constexpr std::size_t kMaxConfigFileBytes = 16u * 1024u * 1024u;

// Whether other users may see the file: a secret (a rendezvous token, a key) must not be readable or writable by
// anyone but its owner (mode 600), as ssh insists for its keys.
enum class FileSecrecy { kAny, kOwnerOnly };

// The whole file at `path`. `what` names the file's role in messages ("config file", "hostfile"). Throws UsageError
// when it is missing, unreadable, not a regular file or larger than `max_bytes` (also one that grows past the limit
// while it is read), or, kOwnerOnly, when its mode lets other users read or write it.
std::string read_bounded_file(const std::string& path, const std::string& what,
                              std::size_t max_bytes = kMaxConfigFileBytes, FileSecrecy secrecy = FileSecrecy::kAny);

}  // namespace mgtrain
