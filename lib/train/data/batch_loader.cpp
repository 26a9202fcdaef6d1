// The prefetching batch loader's worker threads and in-order hand-over (see batch_loader.hpp).
#include "train/data/batch_loader.hpp"

#include <algorithm>

#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {

BatchLoader::BatchLoader(const DataSource& source, std::vector<int64_t> indices, int64_t batch_size, bool drop_last,
                         int threads, int prefetch, int64_t start_batch, bool pin_memory)
    : source_(source),
      indices_(std::move(indices)),
      batch_size_(batch_size),
      prefetch_(std::max(1, prefetch)),
      pin_memory_(pin_memory) {
  if (batch_size < 1) throw UsageError(fmt::format("batch size {} must be at least 1", batch_size));
  if (threads < 0) throw UsageError(fmt::format("loader threads {} must not be negative", threads));
  const int64_t n = static_cast<int64_t>(indices_.size());
  batches_total_ = drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
  if (start_batch < 0 || start_batch > batches_total_) {
    throw UsageError(fmt::format("cannot resume at batch {} of an epoch of {} batches", start_batch, batches_total_));
  }
  next_to_claim_ = next_to_deliver_ = start_batch;
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
}

Batch BatchLoader::build(int64_t batch_index) const {
  const int64_t begin = batch_index * batch_size_;
  const int64_t end = std::min<int64_t>(begin + batch_size_, static_cast<int64_t>(indices_.size()));
  const std::vector<int64_t> batch_indices(indices_.begin() + begin, indices_.begin() + end);
  at::NoGradGuard no_grad;
  Batch batch = source_.make_batch(batch_indices);
  if (pin_memory_) {
    batch.inputs = batch.inputs.pin_memory();
    batch.targets = batch.targets.pin_memory();
  }
  return batch;
}

void BatchLoader::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] {
      return stopping_ || next_to_claim_ >= batches_total_ || next_to_claim_ < next_to_deliver_ + prefetch_;
    });
    if (stopping_ || next_to_claim_ >= batches_total_) return;
    const int64_t mine = next_to_claim_++;
    lock.unlock();
    Slot slot;
    try {
      slot.batch = build(mine);
    } catch (...) {
      slot.error = std::current_exception();
    }
    lock.lock();
    ready_.emplace(mine, std::move(slot));
    batch_ready_.notify_all();
  }
}

std::optional<Batch> BatchLoader::next() {
  if (failed_) std::rethrow_exception(failed_);
  if (next_to_deliver_ >= batches_total_) return std::nullopt;
  if (workers_.empty()) {
    try {
      return build(next_to_deliver_++);
    } catch (...) {
      failed_ = std::current_exception();
      throw;
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  batch_ready_.wait(lock, [this] { return ready_.count(next_to_deliver_) > 0; });
  auto node = ready_.extract(next_to_deliver_);
  ++next_to_deliver_;
  lock.unlock();
  work_ready_.notify_all();  // room for one more batch in the window
  if (node.mapped().error) {
    failed_ = node.mapped().error;
    std::rethrow_exception(failed_);
  }
  return std::move(node.mapped().batch);
}

}  // namespace mgtrain
