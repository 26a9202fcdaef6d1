// Notices when a worker's heartbeat file (MGTRAIN_HEARTBEAT_FILE) is created, touched or written.
// The launcher only stat()s it; the worker decides how often it beats.
#pragma once

#include <string>

namespace mgtrain {

class HeartbeatFile {
 public:
  explicit HeartbeatFile(std::string path) : path_(std::move(path)) {}

  // True when the file exists and its modification time, size or inode differ from the last check.
  bool changed_since_last_check();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool seen_ = false;
  long long mtime_ns_ = 0;
  long long size_ = 0;
  unsigned long long inode_ = 0;
};

}  // namespace mgtrain
