// Data-parallel gradient synchronisation, as Python's DistributedDataParallel does it: gradients are
// grouped into buckets (reverse registration order, a small first bucket, then up to bucket_cap_mb),
// and each bucket's all-reduce starts asynchronously the moment its last gradient is accumulated during
// backward (autograd post-hooks on the parameters' gradient accumulators), so communication overlaps
// computation. Buckets are launched in the same order on every rank. See ARCHITECTURE.md.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "train/parallel/communicator.hpp"

namespace mgtrain {

struct ReducerOptions {
  double bucket_cap_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool skip_communication = false;  // benchmarks only: measure the step without all-reduce
  // The caller already divided the loss by the world size, so gradients arrive as g / world and a plain sum
  // all-reduce gives the mean: one pass over every gradient saved. Off: the reducer divides each bucket.
  bool gradients_prescaled = false;
};

class GradientReducer {
 public:
  GradientReducer(std::vector<std::pair<std::string, at::Tensor>> named_parameters, Communicator& comm,
                  ReducerOptions options);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before backward. sync=false for gradient-accumulation micro-steps: gradients only accumulate locally.
  void begin_backward(bool sync);
  // After backward of a sync step: launches what is left, waits for every bucket and leaves each
  // parameter's .grad holding the average over ranks. Throws when a parameter got no gradient and
  // find_unused_parameters is off (naming the parameters), instead of waiting forever.
  void finish_backward();
  // Seconds finish_backward has spent so far waiting for the buckets' all-reduces: mostly time this rank waited for
  // slower ones (the heartbeat's "wait", docs/diagnosis.md). Host time: meaningful where Work::wait blocks
  // the host (CPU tensors), not for NCCL, whose wait only orders streams.
  double wait_seconds() const { return std::chrono::duration<double>(waited_).count(); }
  // Zeroes the gradients (bucket views stay in place with gradient_as_bucket_view).
  void zero_grad();

  // Bucket layout, for tests and logs: parameter indices per bucket, in launch order.
  std::vector<std::vector<std::size_t>> bucket_layout() const;
  std::size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    at::Tensor flat;                      // all gradients of the bucket, contiguous
    std::vector<std::size_t> parameters;  // indices into params_
    std::vector<at::Tensor> views;        // per parameter: its slice of `flat`, shaped like the parameter
    std::size_t pending = 0;              // gradients still to come this step
    bool launched = false;
    torch_compat::WorkHandle work;
  };
  struct ParameterSlot {
    std::string name;
    at::Tensor tensor;
    std::size_t bucket = 0;
    std::size_t index_in_bucket = 0;
    bool ready = false;
  };
  class ReadyHook;

  void assign_buckets();
  void install_hooks();
  void mark_ready(std::size_t parameter);  // called by the autograd engine
  void launch_ready_buckets_in_order();
  void launch(Bucket& bucket);

  std::vector<ParameterSlot> params_;
  std::vector<Bucket> buckets_;
  Communicator& comm_;
  ReducerOptions options_;
  std::vector<std::shared_ptr<void>> accumulators_;  // keeps the hooked grad accumulators alive
  std::mutex mutex_;
  bool sync_ = false;
  bool in_backward_ = false;
  std::size_t next_to_launch_ = 0;
  std::chrono::steady_clock::duration waited_{};
};

}  // namespace mgtrain
