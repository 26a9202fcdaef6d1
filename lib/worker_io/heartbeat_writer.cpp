// Writes the progress counter into the heartbeat file (see heartbeat_writer.hpp).
#include "worker_io/heartbeat_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "contract/heartbeat_line.hpp"
#include "util/error.hpp"
#include "util/time_format.hpp"

namespace mgtrain {

HeartbeatWriter::HeartbeatWriter(const std::string& path, int min_interval_ms)
    : min_interval_(std::chrono::milliseconds(min_interval_ms)) {
  if (path.empty()) return;
  fd_.reset(open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (!fd_) throw SystemError("cannot open the heartbeat file " + path, errno);
}

HeartbeatWriter::~HeartbeatWriter() = default;

void HeartbeatWriter::beat(std::int64_t progress) { beat(progress, std::nan("")); }

void HeartbeatWriter::beat(std::int64_t progress, double loss) { beat(progress, loss, std::nullopt); }

void HeartbeatWriter::beat(std::int64_t progress, double loss, std::optional<double> wait_seconds) {
  if (!fd_) return;
  HeartbeatInfo info;
  info.step = progress;
  if (std::isfinite(loss)) info.loss = loss;
  info.time = unix_seconds_now();
  info.wait = wait_seconds;
  info.start_step = start_step_;
  info.start_source = start_source_;
  info.snapshot_step = snapshot_step_;
  info.snapshot_time = snapshot_time_;
  newest_ = info;
  const auto now = std::chrono::steady_clock::now();
  if (last_ != std::chrono::steady_clock::time_point{} && now - last_ < min_interval_) {
    held_ = info;
    return;
  }
  last_ = now;
  write(info);
}

void HeartbeatWriter::set_snapshot(std::int64_t step, double unix_time) {
  snapshot_step_ = step;
  snapshot_time_ = unix_time;
  if (!fd_ || !newest_) return;
  newest_->snapshot_step = step;
  newest_->snapshot_time = unix_time;
  last_ = std::chrono::steady_clock::now();
  write(*newest_);
}

void HeartbeatWriter::flush() {
  if (!fd_ || !held_) return;
  last_ = std::chrono::steady_clock::now();
  write(*held_);
}

void HeartbeatWriter::write(const HeartbeatInfo& info) {
  held_.reset();
  // Fixed size: spaces up to the newline, so readers need no truncation and never see an older tail.
  char text[kLineBytes];
  std::memset(text, ' ', sizeof text);
  const std::string line = format_heartbeat_line(info);
  // NOLINTNEXTLINE(bugprone-not-null-terminated-result): a fixed-size record ending in '\n', not a C string
  std::memcpy(text, line.data(), std::min(line.size(), sizeof text - 1));
  text[sizeof text - 1] = '\n';
  // A failed write is not fatal: the watchdog would then report this worker as silent.
  (void)!pwrite(fd_.get(), text, sizeof text, 0);
}

}  // namespace mgtrain
