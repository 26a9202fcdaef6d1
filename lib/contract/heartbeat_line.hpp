// The progress file (MGTRAIN_HEARTBEAT_FILE, docs/diagnosis.md): the contract between any worker and the
// launcher's hang detection. A worker reports progress by touching the file, by writing a decimal step count
// ("41\n"), or with the heartbeat line mgtrain-worker rewrites, {"step":N,"loss":x,"time":unix} (loss null
// before the first step). The launcher watches the file change (its time is the progress time) and reads the
// step back (parse_progress_step); the status API reads the whole line.
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
// The step a progress file reports: the heartbeat line's step, or a decimal count (blanks around it allowed);
// nullopt for anything else (an empty, touched file).
std::optional<std::int64_t> parse_progress_step(std::string_view text);

}  // namespace mgtrain
