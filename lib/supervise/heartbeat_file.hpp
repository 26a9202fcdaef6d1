// Notices when a worker's progress file (MGTRAIN_HEARTBEAT_FILE, contract/heartbeat_line.hpp) is created,
// touched or written, and reads back the step it reports. The launcher only stat()s it, and reads its first bytes
// when it changed; the worker decides how often it reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mgtrain {

// One change of a progress file.
struct ProgressChange {
  double wall_time = 0;              // Unix seconds of the change: the file's modification time
  std::optional<std::int64_t> step;  // the step it reports; nullopt: touched only
};

class HeartbeatFile {
 public:
  explicit HeartbeatFile(std::string path) : path_(std::move(path)) {}

  // The change since the last check: the file exists and its modification time, size or inode differ. Content
  // that is no step (empty, caught half-rewritten) keeps the step read before.
  std::optional<ProgressChange> poll();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool seen_ = false;
  long long mtime_ns_ = 0;
  long long size_ = 0;
  unsigned long long inode_ = 0;
  std::optional<std::int64_t> step_;
};

}  // namespace mgtrain
