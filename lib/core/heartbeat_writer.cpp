// Writes the progress counter into the heartbeat file (see heartbeat_writer.hpp).
#include "core/heartbeat_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "core/error.hpp"

namespace mgtrain {

HeartbeatWriter::HeartbeatWriter(const std::string& path, int min_interval_ms)
    : min_interval_(std::chrono::milliseconds(min_interval_ms)) {
  if (path.empty()) return;
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw SystemError("cannot open the heartbeat file " + path, errno);
}

HeartbeatWriter::~HeartbeatWriter() {
  if (fd_ >= 0) close(fd_);
}

void HeartbeatWriter::beat(std::int64_t progress) {
  if (fd_ < 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (last_ != std::chrono::steady_clock::time_point{} && now - last_ < min_interval_) return;
  last_ = now;
  char text[32];
  int n = std::snprintf(text, sizeof text, "%020lld\n", static_cast<long long>(progress));
  // A failed write is not fatal: the watchdog would then report this worker as silent.
  (void)!pwrite(fd_, text, static_cast<std::size_t>(n), 0);
}

}  // namespace mgtrain
