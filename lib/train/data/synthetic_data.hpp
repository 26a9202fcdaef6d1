// The `synthetic` data set: generated classification data for benchmarks and convergence tests.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "train/data/data_source.hpp"

namespace mgtrain {

// `samples` samples of `shape`, `classes` classes, generated with torch's CPU generator from `seed` — identical on
// every rank and every run. Each class c has a fixed mean vector m_c (drawn from `seed`, shared by both splits); a
// sample of class y is m_y + N(0, 1) noise, with the means scaled so that two class means lie about 6 noise standard
// deviations apart: learnable (a linear model gets well above 90%) but not trivial at initialisation. Labels are
// uniform. The train and test splits use different noise and labels. Everything is generated at open time (float32).
std::unique_ptr<DataSource> open_synthetic_data(const std::vector<int64_t>& shape, int64_t classes, int64_t samples,
                                                Split split, uint64_t seed);

// Samples in the synthetic test split.
inline constexpr int64_t kSyntheticTestSamples = 10000;

}  // namespace mgtrain
