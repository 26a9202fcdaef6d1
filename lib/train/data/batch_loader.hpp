// Background batch preparation for the training loop: worker threads build the batches of one epoch ahead of the
// step into a bounded window, and the loop takes them in order.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "train/data/batch.hpp"
#include "train/data/data_source.hpp"

namespace mgtrain {

// Batch k holds indices[k*batch_size, (k+1)*batch_size); the last one is partial unless drop_last drops it.
// `threads` workers (0: build each batch synchronously inside next()) claim batches in order and at most `prefetch`
// batches (>= 1) are built ahead of the one next() returns, so memory stays bounded. next() returns batches strictly
// in order. `start_batch` skips the first batches (mid-epoch resume). An exception thrown while building batch k is
// rethrown by the next() call that would have returned batch k (and by every later call). The destructor stops the
// workers after the batches they are building right now; it never waits for the rest of the epoch.
// `source` must outlive the loader. next() is meant for one consumer thread. With `pin_memory` (a CUDA device only)
// the worker threads put each batch in page-locked memory, so the loop's non_blocking copies to the GPU are
// asynchronous DMA transfers that overlap with the step.
class BatchLoader {
 public:
  BatchLoader(const DataSource& source, std::vector<int64_t> indices, int64_t batch_size, bool drop_last, int threads,
              int prefetch, int64_t start_batch = 0, bool pin_memory = false);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // The next batch, or nullopt when the epoch is done.
  std::optional<Batch> next();
  // Batches in the whole epoch, including those skipped by start_batch.
  int64_t batches_total() const { return batches_total_; }
  // Index of the batch the next call to next() returns.
  int64_t next_batch_index() const { return next_to_deliver_; }

 private:
  struct Slot {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };
  Batch build(int64_t batch_index) const;
  void worker_loop();

  const DataSource& source_;
  const std::vector<int64_t> indices_;
  const int64_t batch_size_;
  const int prefetch_;
  const bool pin_memory_;
  int64_t batches_total_ = 0;

  std::mutex mutex_;
  std::condition_variable work_ready_;   // workers wait for room in the prefetch window
  std::condition_variable batch_ready_;  // next() waits for its batch
  int64_t next_to_claim_ = 0;
  int64_t next_to_deliver_ = 0;
  std::map<int64_t, Slot> ready_;
  std::exception_ptr failed_;  // once rethrown, rethrown again by every later next()
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace mgtrain
