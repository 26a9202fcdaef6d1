// stat()-based change detection for progress files, and the step they report.
#include "supervise/heartbeat_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "contract/heartbeat_line.hpp"
#include "util/fd.hpp"

namespace mgtrain {
namespace {

// The file's first bytes (a step count or a heartbeat line is short); "" when it cannot be read.
std::string head_of(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) return "";
  char buffer[256];
  ssize_t got = read(fd.get(), buffer, sizeof buffer);
  return got > 0 ? std::string(buffer, static_cast<std::size_t>(got)) : "";
}

}  // namespace

std::optional<ProgressChange> HeartbeatFile::poll() {
  struct stat info {};
  if (stat(path_.c_str(), &info) != 0) return std::nullopt;
  long long mtime_ns = static_cast<long long>(info.st_mtim.tv_sec) * 1000000000LL + info.st_mtim.tv_nsec;
  bool changed = !seen_ || mtime_ns != mtime_ns_ || info.st_size != size_ || info.st_ino != inode_;
  seen_ = true;
  mtime_ns_ = mtime_ns;
  size_ = info.st_size;
  inode_ = info.st_ino;
  if (!changed) return std::nullopt;
  ProgressChange change;
  change.wall_time = static_cast<double>(mtime_ns) / 1e9;
  // A rewrite caught half-way (empty, or a torn line) keeps the step read before.
  if (info.st_size > 0) {
    if (std::optional<std::int64_t> step = parse_progress_step(head_of(path_))) step_ = step;
  }
  change.step = step_;
  return change;
}

}  // namespace mgtrain
