// stat()-based change detection for heartbeat files.
#include "supervise/heartbeat_file.hpp"

#include <sys/stat.h>

namespace mgtrain {

bool HeartbeatFile::changed_since_last_check() {
  struct stat info {};
  if (stat(path_.c_str(), &info) != 0) return false;
  long long mtime_ns = static_cast<long long>(info.st_mtim.tv_sec) * 1000000000LL + info.st_mtim.tv_nsec;
  bool changed = !seen_ || mtime_ns != mtime_ns_ || info.st_size != size_ || info.st_ino != inode_;
  seen_ = true;
  mtime_ns_ = mtime_ns;
  size_ = info.st_size;
  inode_ = info.st_ino;
  return changed;
}

}  // namespace mgtrain
