// The asynchronous front of the shared-memory all-reduce: a queue and one thread that runs the operations
// in issue order (see shm_allreduce.hpp; the segment and the sum itself are in shm_segment.cpp).
#include "train/parallel/shm_allreduce.hpp"

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "train/parallel/shm_segment.hpp"
#include "train/parallel/spin_budget.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

// A c10d::Work that the background thread completes (finish() is protected in c10d::Work). Its waiter (the training
// thread: the buckets, the step vote) polls while that pays off (spin_budget.hpp, one budget per communicator), then
// sleeps in c10d::Work::wait.
class ShmWork final : public c10d::Work {
 public:
  explicit ShmWork(std::shared_ptr<SpinBudget> spin)
      : c10d::Work(-1, c10d::OpType::ALLREDUCE), spin_(std::move(spin)) {}
  void complete(std::exception_ptr error) { finish(std::move(error)); }
  bool wait(std::chrono::milliseconds timeout) override {
    spin_->spin([this] { return isCompleted(); });
    return c10d::Work::wait(timeout);
  }

 private:
  std::shared_ptr<SpinBudget> spin_;
};

}  // namespace

class ShmAllreduce::Impl {
 public:
  Impl(std::unique_ptr<ShmReduceGroup> group, c10::intrusive_ptr<c10d::Store> store, double connect_timeout_s)
      : group_(std::move(group)),
        store_(std::move(store)),
        connect_timeout_s_(connect_timeout_s),
        thread_([this] { run(); }) {}

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    group_->abort();  // a wait on a peer that will never come ends now instead of at the timeout
    ready_.notify_all();
    thread_.join();
  }

  torch_compat::WorkHandle submit(const at::Tensor& tensor) {
    auto work = c10::make_intrusive<ShmWork>(waits_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::shared_ptr<ShmReduceGroup::SharedBuffer> shared;
      if (auto found = buffers_.find(tensor.data_ptr()); found != buffers_.end() && tensor.is_contiguous())
        shared = found->second;
      queue_.push_back(Operation{tensor, std::move(shared), work});
    }
    ready_.notify_one();
    return work;
  }

  at::Tensor allocate(std::int64_t numel, c10::ScalarType type) {
    const std::size_t bytes = static_cast<std::size_t>(numel) * c10::elementSize(type);
    auto buffer = group_->allocate_shared_buffer(*store_, bytes, connect_timeout_s_);
    if (!buffer) return {};
    char* mine = buffer->regions[static_cast<std::size_t>(group_->rank())];
    // The tensor keeps the mapping alive; the registry lets submit() recognise it.
    at::Tensor tensor = at::from_blob(
        mine, {numel}, [buffer](void*) {}, at::TensorOptions().dtype(type));
    std::lock_guard<std::mutex> lock(mutex_);
    buffers_[mine] = std::move(buffer);
    return tensor;
  }

 private:
  struct Operation {
    at::Tensor tensor;
    std::shared_ptr<ShmReduceGroup::SharedBuffer> shared;  // set: the tensor is (the start of) this shared buffer
    c10::intrusive_ptr<ShmWork> work;
  };

  void run() {
    std::exception_ptr failure;  // after one failure the ranks are out of step: every later operation fails too
    for (;;) {
      Operation op;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      if (!failure) {
        try {
          if (op.shared) {
            group_->allreduce_sum_shared(*op.shared, op.tensor.scalar_type(), op.tensor.numel());
          } else if (op.tensor.is_contiguous()) {
            group_->allreduce_sum(op.tensor);
          } else {
            at::Tensor packed = op.tensor.contiguous();
            group_->allreduce_sum(packed);
            op.tensor.copy_(packed);
          }
        } catch (...) {
          failure = std::current_exception();
        }
      }
      op.tensor.reset();
      op.shared.reset();
      op.work->complete(failure);
    }
  }

  std::unique_ptr<ShmReduceGroup> group_;
  c10::intrusive_ptr<c10d::Store> store_;
  double connect_timeout_s_;
  std::map<const void*, std::shared_ptr<ShmReduceGroup::SharedBuffer>> buffers_;  // by this rank's region
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Operation> queue_;
  bool stopping_ = false;
  std::shared_ptr<SpinBudget> waits_ = std::make_shared<SpinBudget>();  // the waits on this communicator's works
  std::thread thread_;                                                  // last: starts once everything above exists
};

std::unique_ptr<ShmAllreduce> ShmAllreduce::connect(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                                                    const std::string& run_tag, double connect_timeout_s,
                                                    double timeout_s) {
  auto group = ShmReduceGroup::connect(*store, rank, world_size, run_tag, connect_timeout_s, timeout_s);
  if (!group) return nullptr;
  return std::unique_ptr<ShmAllreduce>(
      new ShmAllreduce(std::make_unique<Impl>(std::move(group), std::move(store), connect_timeout_s)));
}

ShmAllreduce::ShmAllreduce(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShmAllreduce::~ShmAllreduce() = default;

bool ShmAllreduce::supports(const at::Tensor& tensor) {
  return tensor.defined() && tensor.device().is_cpu() && !tensor.is_sparse() &&
         (tensor.scalar_type() == at::kFloat || tensor.scalar_type() == at::kDouble);
}

torch_compat::WorkHandle ShmAllreduce::allreduce_sum_async(const at::Tensor& tensor) { return impl_->submit(tensor); }

at::Tensor ShmAllreduce::allocate_buffer(std::int64_t numel, c10::ScalarType type) {
  return impl_->allocate(numel, type);
}

}  // namespace mgtrain
