// The trainable state for checkpoints: model parameters and buffers, the torch::optim optimizer's per-parameter state
// and the random generators' states as an ordered list of named tensors; a one-buffer CPU snapshot of such a list for
// a background writer; and restoring all of it (checked against the model) from named byte blobs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "train/models/model.hpp"

namespace torch::optim {
class Optimizer;
}

namespace mgtrain {

// One stored tensor as bytes: the fields of the checkpoint file's records. dtype is a safetensors dtype string
// ("F32", "F64", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"); data holds nbytes = numel * element size
// bytes, C-contiguous, little-endian (the machine's order). The pointer is borrowed.
struct TensorView {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// The safetensors dtype string of a tensor's scalar type, and back; a type outside the list above is an Error
// naming it.
std::string dtype_name(c10::ScalarType type);
c10::ScalarType scalar_type_of(const std::string& dtype);
// A stored tensor as a CPU tensor over its bytes (no copy; only read from).
at::Tensor tensor_over(const TensorView& view);

// Where restore reads from: the stored tensors by name. A checkpoint reader adapts to this; TensorViewMap is the
// ready-made one over a list of views.
class TensorLookup {
 public:
  virtual ~TensorLookup();
  // Every stored name, in the stored order (names with other prefixes are allowed and ignored by restore).
  virtual std::vector<std::string> names() const = 0;
  // The tensor called `name`, or nullptr.
  virtual const TensorView* find(const std::string& name) const = 0;
};

class TensorViewMap : public TensorLookup {
 public:
  explicit TensorViewMap(std::vector<TensorView> views);
  std::vector<std::string> names() const override;
  const TensorView* find(const std::string& name) const override;

 private:
  std::vector<TensorView> views_;
  std::unordered_map<std::string, size_t> index_;
};

// The model's and optimizer's state, in this order:
//   "model/<parameter name>" for Model::named_parameters(), then "model/<buffer name>" for named_buffers();
//   then per parameter, in parameter order, "optim/<parameter name>/<field>":
//     sgd (momentum > 0): momentum_buffer;
//     adam, adamw:        step (0-dim I64: LibTorch keeps the step count as an int64_t per parameter), exp_avg,
//                         exp_avg_sq, and max_exp_avg_sq when amsgrad.
// A parameter the optimizer holds no state for yet (before its first step) has no optim entries. The model and
// optimizer tensors are the live ones, not copies (only "step" is a new tensor): snapshot them before training goes on.
// The optimizer must have been built over the model's parameter tensors. Other optimizer types are an Error.
NamedTensors capture_train_state(Model& model, const torch::optim::Optimizer& optimizer);

// Restores what capture_train_state captured. Everything is checked before anything is changed:
//  - every "model/" tensor of the model must be stored with the same shape and dtype, and the stored "model/" names
//    must all be the model's; the first mismatch in the model's order is a UsageError like
//    "checkpoint does not match the model: model/1.weight has shape [1024, 784] in the checkpoint and [512, 784] in
//    the model (were the model: settings changed?)";
//  - per parameter, the stored "optim/" fields are either none (no state yet: the optimizer starts it afresh) or
//    exactly those of this optimizer, with the parameter's shape; fields of another optimizer (exp_avg for sgd,
//    momentum_buffer for adam) or of another amsgrad setting are a UsageError naming the optimizers.
// Then values are copied in place into the parameters and buffers (under NoGradGuard, onto their device and dtype)
// and the optimizer's state for every model parameter is replaced by the stored one (or dropped when none is
// stored). Names with other prefixes (e.g. "rng/") are ignored.
void restore_train_state(Model& model, torch::optim::Optimizer& optimizer, const TensorLookup& stored);

// The random generators' states as U8 tensors (copies; rng_state.cpp): "rng/cpu" (the default CPU generator, which
// initialisation and dropout on CPU draw from) and, in CUDA builds with a GPU, "rng/cuda" (the current device's default
// generator).
NamedTensors capture_rng_state();
// Sets the generators from "<prefix>rng/cpu" (required: a missing or malformed one is a UsageError) and
// "<prefix>rng/cuda" (restored when stored and CUDA is available, else ignored).
void restore_rng_state(const TensorLookup& stored, const std::string& prefix = "");

// One index entry of a snapshot: where a tensor's bytes are in the buffer.
struct SnapshotEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  size_t offset = 0;  // from the start of the buffer; a multiple of 8
  size_t nbytes = 0;
};

// A copy of a list of named tensors in ONE contiguous CPU byte buffer (each tensor C-contiguous at an 8-byte aligned
// offset, in the list's order) plus its index, so a background thread can write it while training changes the live
// tensors. take() is a memcpy per CPU tensor (split over threads when large); GPU tensors are copied with
// non_blocking copies into pinned memory and one synchronisation at the end. The buffer is kept and reused while the
// total size stays the same. Not thread-safe: do not call take() while a writer still reads views() or data().
class StateSnapshot {
 public:
  StateSnapshot();
  ~StateSnapshot();
  StateSnapshot(const StateSnapshot&) = delete;
  StateSnapshot& operator=(const StateSnapshot&) = delete;

  // Copies `tensors` (any device, dtype from the list above) into the buffer, replacing the previous snapshot.
  void take(const NamedTensors& tensors);

  const std::vector<SnapshotEntry>& entries() const { return entries_; }
  // The entries as views into the buffer, valid until the next take() or destruction.
  std::vector<TensorView> views() const;
  const uint8_t* data() const;
  size_t size() const { return size_; }  // bytes in use, padding included
  // How many times take() had to allocate a buffer (for tests and diagnostics).
  int64_t allocations() const { return allocations_; }

 private:
  at::Tensor buffer_;  // kByte CPU tensor (pinned when a GPU tensor was copied); its storage is the buffer
  bool pinned_ = false;
  size_t size_ = 0;
  std::vector<SnapshotEntry> entries_;
  int64_t allocations_ = 0;
};

}  // namespace mgtrain
