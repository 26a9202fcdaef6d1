// BatchLoader: in-order delivery with several threads, resume offset, partial last batch, error propagation and
// prompt shutdown.
#include "catch_with_torch.hpp"

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>

#include "train/data/batch_loader.hpp"

using mgtrain::Batch;
using mgtrain::BatchLoader;

namespace {

// Sample i is the value i; building a batch takes a random few milliseconds (so threads finish out of order), and
// the batch containing `poison` fails.
class CountingSource final : public mgtrain::DataSource {
 public:
  explicit CountingSource(int64_t n, int64_t poison = -1, int max_delay_ms = 3)
      : n_(n), poison_(poison), max_delay_ms_(max_delay_ms) {}
  int64_t size() const override { return n_; }
  std::vector<int64_t> sample_shape() const override { return {1}; }
  int64_t num_classes() const override { return 2; }
  Batch make_batch(const std::vector<int64_t>& indices) const override {
    ++calls;
    thread_local std::mt19937 rng(std::hash<std::thread::id>()(std::this_thread::get_id()));
    if (max_delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(rng() % (max_delay_ms_ + 1)));
    for (int64_t i : indices) {
      if (i == poison_) throw std::runtime_error("cannot decode sample " + std::to_string(i));
    }
    const at::Tensor t = at::tensor(indices, at::kLong);
    return Batch{t.to(at::kFloat).unsqueeze(1), t};
  }
  std::string description() const override { return "counting"; }
  mutable std::atomic<int> calls{0};

 private:
  int64_t n_, poison_;
  int max_delay_ms_;
};

std::vector<int64_t> iota(int64_t n, int64_t offset = 0) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = offset + i;
  return v;
}

std::vector<int64_t> targets_of(const Batch& b) {
  const int64_t* p = b.targets.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + b.targets.size(0));
}

}  // namespace

TEST_CASE("loader: batches come out in order with several threads, last partial batch kept") {
  const CountingSource source(1000);
  std::vector<int64_t> indices = iota(103, 500);  // not starting at 0, so indices and positions differ
  for (int threads : {0, 1, 3}) {
    BatchLoader loader(source, indices, 10, /*drop_last=*/false, threads, /*prefetch=*/4);
    CHECK(loader.batches_total() == 11);
    std::vector<int64_t> seen;
    int batches = 0;
    while (auto batch = loader.next()) {
      ++batches;
      CHECK(batch->inputs.sizes() == at::IntArrayRef({batch->targets.size(0), 1}));
      const auto t = targets_of(*batch);
      seen.insert(seen.end(), t.begin(), t.end());
    }
    CHECK(batches == 11);
    CHECK(seen == indices);
    CHECK_FALSE(loader.next().has_value());
  }
}

TEST_CASE("loader: drop_last drops the partial batch") {
  const CountingSource source(100, -1, 0);
  BatchLoader loader(source, iota(25), 10, /*drop_last=*/true, 2, 2);
  CHECK(loader.batches_total() == 2);
  CHECK(loader.next()->targets.size(0) == 10);
  CHECK(loader.next()->targets.size(0) == 10);
  CHECK_FALSE(loader.next());
}

TEST_CASE("loader: start_batch resumes mid-epoch") {
  const CountingSource source(100, -1, 0);
  for (int threads : {0, 2}) {
    BatchLoader loader(source, iota(95), 10, false, threads, 3, /*start_batch=*/7);
    CHECK(loader.batches_total() == 10);
    CHECK(loader.next_batch_index() == 7);
    CHECK(targets_of(*loader.next()).front() == 70);
    CHECK(targets_of(*loader.next()).front() == 80);
    const auto last = targets_of(*loader.next());
    CHECK(last == iota(5, 90));
    CHECK_FALSE(loader.next());
  }
  CHECK_THROWS(BatchLoader(source, iota(95), 10, false, 0, 3, 11));
  BatchLoader at_end(source, iota(95), 10, false, 2, 3, 10);  // resuming exactly at the end: nothing left
  CHECK_FALSE(at_end.next());
}

TEST_CASE("loader: an exception in a worker is rethrown by next() in order") {
  for (int threads : {0, 2}) {
    const CountingSource source(100, /*poison=*/35);
    BatchLoader loader(source, iota(100), 10, false, threads, 4);
    for (int i = 0; i < 3; ++i) CHECK(targets_of(*loader.next()).front() == i * 10);  // batches before the failure
    CHECK_THROWS_WITH(loader.next(), "cannot decode sample 35");
    CHECK_THROWS_WITH(loader.next(), "cannot decode sample 35");  // and it stays failed
  }
}

TEST_CASE("loader: prefetching is bounded and destruction does not wait for the epoch") {
  const CountingSource source(100000, -1, /*max_delay_ms=*/20);
  const auto start = std::chrono::steady_clock::now();
  {
    BatchLoader loader(source, iota(100000), 10, false, 2, /*prefetch=*/3);
    REQUIRE(loader.next());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // 1 delivered + at most 3 ahead, whatever the time waited.
    CHECK(source.calls.load() <= 4);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 2.0);
  // Destroying a loader that never delivered anything is prompt too.
  { BatchLoader untouched(source, iota(100000), 10, false, 4, 8); }
}

// Not run by ctest (hidden tag); `test_train_data "[.bench]"` prints how long building a batch takes.
TEST_CASE("loader: batch building cost", "[.bench]") {
  mgtrain::DataConfig config;
  config.dataset = mgtrain::DatasetKind::Synthetic;
  config.synthetic_samples = 60000;
  const auto source = mgtrain::open_data_source(config, mgtrain::Split::Train, 0, 1);
  std::vector<int64_t> indices(60000);
  for (int64_t i = 0; i < 60000; ++i) indices[i] = (i * 7919) % 60000;
  for (int threads : {0, 1, 2}) {
    const auto start = std::chrono::steady_clock::now();
    BatchLoader loader(*source, indices, 64, false, threads, 4);
    int64_t batches = 0;
    while (loader.next()) ++batches;
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / batches;
    WARN("synthetic 1x28x28, batch 64, " << threads << " loader threads: " << us << " us per batch");
  }
}
