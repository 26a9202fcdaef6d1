// Rank 0's progress, formatted: the plain line for logs and non-terminals ("mgtrain: step 120/1000 epoch 1
// loss 0.5312 lr 0.01 5012 samples/s eta 1m20s", the format tests and scripts grep for) and the live bar for
// a terminal, fitted to a width. Pure functions of the numbers; the reporter decides when and where.
#pragma once

#include <cstdint>
#include <string>

namespace mgtrain {

struct ProgressSnapshot {
  std::int64_t step = 0;  // steps done
  std::int64_t total_steps = 0;
  std::int64_t epoch = 1;  // 1-based
  double loss = 0;
  double lr = 0;
  double samples_per_s = 0;
  double eta_s = 0;      // time left
  double elapsed_s = 0;  // time since training started (shown when done)
};

// The plain line, without a newline.
std::string format_progress_line(const ProgressSnapshot& p);

// The bar, exactly `width` columns or fewer (ASCII only, so bytes = columns):
// "epoch 1 step 120/1000 [====>       ]  12% loss 0.5312 lr 0.01 5012 samples/s ETA 1m20s", or where that
// leaves under 10 columns of bar, "ep 1 [==>    ] 120/1000  12% loss 0.5312 5012/s ETA 1m20s"; narrower still,
// the compact text without a bar, cut at the width. The bar takes what the text leaves, at most 40 columns.
// When step == total_steps, "ETA ..." becomes "in <elapsed>".
std::string format_progress_bar(const ProgressSnapshot& p, int width);

}  // namespace mgtrain
