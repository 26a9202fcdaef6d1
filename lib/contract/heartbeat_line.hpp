// The worker's heartbeat line (contract between mgtrain-worker and the launcher): the worker rewrites
// MGTRAIN_HEARTBEAT_FILE with {"step":N,"loss":x,"time":unix} (loss null before the first step); the
// launcher's watchdog watches the file change and the status API reads the line back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mgtrain {

struct HeartbeatInfo {
  std::int64_t step = 0;
  std::optional<double> loss;
  double time = 0;  // Unix seconds of the beat
};

std::string format_heartbeat_line(const HeartbeatInfo& info);  // one line, no newline
// nullopt when the text (trailing padding allowed) is not a heartbeat object with a step and a time.
std::optional<HeartbeatInfo> parse_heartbeat_line(std::string_view text);

}  // namespace mgtrain
