// The worker's side of the hang watchdog: touches MGTRAIN_HEARTBEAT_FILE (set by the launcher) as it
// makes progress, at most every `min_interval_ms`, so a stuck worker goes quiet and a live one costs
// about one pwrite per interval. Without the variable it does nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace mgtrain {

class HeartbeatWriter {
 public:
  explicit HeartbeatWriter(const std::string& path, int min_interval_ms = 200);
  ~HeartbeatWriter();
  HeartbeatWriter(const HeartbeatWriter&) = delete;
  HeartbeatWriter& operator=(const HeartbeatWriter&) = delete;

  // Records progress (e.g. the step number); writes only if the interval has passed.
  void beat(std::int64_t progress);
  bool active() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  std::chrono::steady_clock::duration min_interval_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace mgtrain
