// Bucketed, overlapped gradient all-reduce (see gradient_reducer.hpp).
#include "train/parallel/gradient_reducer.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "util/error.hpp"

namespace mgtrain {

// Runs right after autograd accumulated a parameter's gradient into .grad.
class GradientReducer::ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(GradientReducer* reducer, std::size_t parameter) : reducer_(reducer), parameter_(parameter) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    reducer_->mark_ready(parameter_);
    return outputs;
  }

 private:
  GradientReducer* reducer_;
  std::size_t parameter_;
};

namespace {

struct HookedAccumulator {
  torch_compat::AutogradNodePtr node;
  std::uintptr_t key;
};

}  // namespace

GradientReducer::GradientReducer(std::vector<std::pair<std::string, at::Tensor>> named_parameters, Communicator& comm,
                                 ReducerOptions options)
    : comm_(comm), options_(options) {
  for (auto& [name, tensor] : named_parameters) {
    if (!tensor.requires_grad()) continue;
    params_.push_back(ParameterSlot{name, tensor, 0, 0, false});
  }
  assign_buckets();
  install_hooks();
}

GradientReducer::~GradientReducer() {
  for (auto& holder : accumulators_) {
    auto* hooked = static_cast<HookedAccumulator*>(holder.get());
    hooked->node->del_post_hook(hooked->key);
  }
}

void GradientReducer::assign_buckets() {
  const double mib = 1024.0 * 1024.0;
  Bucket current;
  std::int64_t current_bytes = 0;
  auto close_bucket = [&] {
    if (!current.parameters.empty()) buckets_.push_back(std::move(current));
    current = Bucket{};
    current_bytes = 0;
  };
  // Reverse registration order approximates the order in which backward produces gradients.
  for (std::size_t i = params_.size(); i-- > 0;) {
    const at::Tensor& p = params_[i].tensor;
    const std::int64_t bytes = p.numel() * static_cast<std::int64_t>(p.element_size());
    const double cap = (buckets_.empty() ? options_.first_bucket_mb : options_.bucket_cap_mb) * mib;
    if (!current.parameters.empty()) {
      const at::Tensor& first = params_[current.parameters.front()].tensor;
      const bool same_kind = first.scalar_type() == p.scalar_type() && first.device() == p.device();
      if (!same_kind || static_cast<double>(current_bytes + bytes) > cap) close_bucket();
    }
    current.parameters.push_back(i);
    current_bytes += bytes;
  }
  close_bucket();

  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    std::int64_t total = 0;
    for (auto i : bucket.parameters) total += params_[i].tensor.numel();
    const at::Tensor& first = params_[bucket.parameters.front()].tensor;
    bucket.flat = comm_.allocate_reduce_buffer(total, first.options().requires_grad(false));
    std::int64_t offset = 0;
    for (std::size_t j = 0; j < bucket.parameters.size(); ++j) {
      ParameterSlot& slot = params_[bucket.parameters[j]];
      slot.bucket = b;
      slot.index_in_bucket = j;
      const std::int64_t n = slot.tensor.numel();
      bucket.views.push_back(bucket.flat.narrow(0, offset, n).view(slot.tensor.sizes()));
      offset += n;
    }
  }
}

void GradientReducer::install_hooks() {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& p = params_[i].tensor;
    if (options_.gradient_as_bucket_view) {
      const Bucket& bucket = buckets_[params_[i].bucket];
      p.mutable_grad() = bucket.views[params_[i].index_in_bucket];
    }
    auto node = torch::autograd::impl::grad_accumulator(p);
    auto key = node->add_post_hook(std::make_unique<ReadyHook>(this, i));
    accumulators_.push_back(std::make_shared<HookedAccumulator>(HookedAccumulator{node, key}));
  }
}

void GradientReducer::begin_backward(bool sync) {
  std::lock_guard<std::mutex> lock(mutex_);
  sync_ = sync;
  in_backward_ = sync;
  if (!sync) return;
  for (auto& slot : params_) slot.ready = false;
  for (auto& bucket : buckets_) {
    bucket.pending = bucket.parameters.size();
    bucket.launched = false;
    bucket.work.reset();
  }
  next_to_launch_ = 0;
}

void GradientReducer::mark_ready(std::size_t parameter) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!in_backward_) return;  // accumulation micro-step, or a backward outside training
  ParameterSlot& slot = params_[parameter];
  if (slot.ready) return;
  slot.ready = true;
  Bucket& bucket = buckets_[slot.bucket];
  at::Tensor& view = bucket.views[slot.index_in_bucket];
  const at::Tensor& grad = slot.tensor.grad();
  if (grad.defined() && !grad.is_same(view)) view.copy_(grad);
  if (--bucket.pending == 0) launch_ready_buckets_in_order();
}

void GradientReducer::launch_ready_buckets_in_order() {
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].pending == 0)
    launch(buckets_[next_to_launch_++]);
}

// CUDA (NCCL): the hook runs on the autograd engine's device thread, whose current stream is the one the
// gradient was produced on; ProcessGroupNCCL makes its stream wait for the caller's current stream before the
// all-reduce, so the copy into the bucket above is ordered before it, and Work::wait() in finish_backward makes the
// training thread's current stream wait for the result (no host synchronisation).
void GradientReducer::launch(Bucket& bucket) {
  bucket.launched = true;
  if (options_.skip_communication || comm_.single_process()) return;
  if (!options_.gradients_prescaled) bucket.flat.div_(comm_.world_size());
  bucket.work = comm_.allreduce_sum_async(bucket.flat);
}

void GradientReducer::finish_backward() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!in_backward_) return;
  in_backward_ = false;
  std::vector<std::string> missing;
  for (auto& slot : params_) {
    if (slot.ready) continue;
    missing.push_back(slot.name);
    if (options_.find_unused_parameters) {
      Bucket& bucket = buckets_[slot.bucket];
      bucket.views[slot.index_in_bucket].zero_();  // an unused parameter contributes zero
      slot.ready = true;
      --bucket.pending;
    }
  }
  if (!missing.empty() && !options_.find_unused_parameters) {
    std::string names;
    for (std::size_t i = 0; i < missing.size() && i < 8; ++i) names += (i ? ", " : "") + missing[i];
    if (missing.size() > 8) names += fmt::format(" and {} more", missing.size() - 8);
    throw UsageError(
        fmt::format("ddp: {} parameter(s) received no gradient in this step on rank {}: {}. Set "
                    "ddp.find_unused_parameters: true if the model leaves parameters unused in some steps",
                    missing.size(), comm_.rank(), names));
  }
  launch_ready_buckets_in_order();
  lock.unlock();
  const auto wait_start = std::chrono::steady_clock::now();
  for (auto& bucket : buckets_) {
    if (bucket.work) bucket.work->wait();
  }
  waited_ += std::chrono::steady_clock::now() - wait_start;
  for (auto& slot : params_) {
    const at::Tensor& view = buckets_[slot.bucket].views[slot.index_in_bucket];
    at::Tensor& grad = slot.tensor.mutable_grad();
    if (options_.gradient_as_bucket_view) {
      if (!grad.is_same(view)) grad = view;
    } else if (grad.defined()) {
      grad.copy_(view);
    } else {
      grad = view.clone();
    }
  }
}

void GradientReducer::zero_grad() {
  if (options_.gradient_as_bucket_view) {
    for (auto& bucket : buckets_) bucket.flat.zero_();
    return;
  }
  for (auto& slot : params_) slot.tensor.mutable_grad().reset();
}

std::vector<std::vector<std::size_t>> GradientReducer::bucket_layout() const {
  std::vector<std::vector<std::size_t>> layout;
  for (const auto& bucket : buckets_) layout.push_back(bucket.parameters);
  return layout;
}

}  // namespace mgtrain
