// Formatting of the progress line and bar (see progress_display.hpp).
#include "worker_io/progress_display.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "util/time_format.hpp"

namespace mgtrain {

std::string format_progress_line(const ProgressSnapshot& p) {
  return fmt::format("mgtrain: step {}/{} epoch {} loss {:.4f} lr {:.5g} {:.0f} samples/s eta {}", p.step,
                     p.total_steps, p.epoch, p.loss, p.lr, p.samples_per_s, format_duration(p.eta_s));
}

std::string format_progress_bar(const ProgressSnapshot& p, int width) {
  constexpr int kMaxBar = 40, kMinBar = 10;
  const double fraction =
      p.total_steps > 0 ? std::clamp(static_cast<double>(p.step) / static_cast<double>(p.total_steps), 0.0, 1.0) : 0.0;
  const bool done = p.total_steps > 0 && p.step >= p.total_steps;
  const int percent = static_cast<int>(fraction * 100.0);
  const std::string time = done ? "in " + format_duration(p.elapsed_s) : "ETA " + format_duration(p.eta_s);
  // Full: "epoch 1 step 120/1000 [bar]  12% loss 0.5312 lr 0.01 5012 samples/s ETA 1m20s";
  // compact (an 80-column terminal behind the launcher's "[rank 0] "): "ep 1 [bar] 120/1000  12% loss 0.5312 5012/s ETA
  // 1m20s".
  const std::string layouts[2][2] = {
      {fmt::format("epoch {} step {}/{} ", p.epoch, p.step, p.total_steps),
       fmt::format(" {:3d}% loss {:.4f} lr {:.3g} {:.0f} samples/s {}", percent, p.loss, p.lr, p.samples_per_s, time)},
      {fmt::format("ep {} ", p.epoch), fmt::format(" {}/{} {:3d}% loss {:.4f} {:.0f}/s {}", p.step, p.total_steps,
                                                   percent, p.loss, p.samples_per_s, time)}};
  std::string text;
  for (const auto& [left, right] : layouts) {
    const int inner = std::min(kMaxBar, width - static_cast<int>(left.size() + right.size()) - 2);
    if (inner < kMinBar) continue;
    const int filled = static_cast<int>(fraction * inner);
    std::string bar(static_cast<std::size_t>(inner), ' ');
    std::fill_n(bar.begin(), filled, '=');
    if (filled < inner && filled > 0) bar[static_cast<std::size_t>(filled)] = '>';
    text = left + "[" + bar + "]" + right;
    break;
  }
  if (text.empty()) text = layouts[1][0] + layouts[1][1].substr(1);  // no room for a bar
  if (width >= 0 && text.size() > static_cast<std::size_t>(width)) text.resize(static_cast<std::size_t>(width));
  return text;
}

}  // namespace mgtrain
