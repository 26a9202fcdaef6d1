// Capturing, snapshotting and restoring the trainable state (see train_state.hpp; the generators' states are in
// rng_state.cpp).
#include "train/state/train_state.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_set>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "train/torch/torch_compat.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mgtrain {
namespace {

constexpr const char* kModelPrefix = "model/";
constexpr const char* kOptimPrefix = "optim/";
constexpr const char* kShapeHint = " (were the model: settings changed?)";

size_t nbytes_of(const std::vector<int64_t>& shape, c10::ScalarType type) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  return static_cast<size_t>(numel) * c10::elementSize(type);
}

// The optimizers make_optimizer builds, recognised by their type.
enum class OptimizerKind { Sgd, Adam, AdamW };

OptimizerKind kind_of(const torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer)) return OptimizerKind::Sgd;
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer)) return OptimizerKind::Adam;
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer)) return OptimizerKind::AdamW;
  throw Error("checkpoint: only the sgd, adam and adamw optimizers' state can be saved and restored");
}

const char* kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::Sgd:
      return "sgd";
    case OptimizerKind::Adam:
      return "adam";
    case OptimizerKind::AdamW:
      return "adamw";
  }
  return "?";
}

// The param group holding each parameter (by TensorImpl), so restore can read that group's options.
const torch::optim::OptimizerParamGroup& group_of(const torch::optim::Optimizer& optimizer, const std::string& name,
                                                  const at::Tensor& parameter) {
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      if (p.unsafeGetTensorImpl() == parameter.unsafeGetTensorImpl()) return group;
    }
  }
  throw Error(
      fmt::format("checkpoint: model parameter {} is not one of the optimizer's parameters (the optimizer must be "
                  "built over the model's own parameter tensors)",
                  name));
}

// The optimizer state fields this optimizer keeps for a parameter in `group`, in capture order.
std::vector<std::string> fields_of(OptimizerKind kind, const torch::optim::OptimizerParamGroup& group) {
  switch (kind) {
    case OptimizerKind::Sgd:
      if (static_cast<const torch::optim::SGDOptions&>(group.options()).momentum() == 0.0) return {};
      return {"momentum_buffer"};
    case OptimizerKind::Adam:
      if (static_cast<const torch::optim::AdamOptions&>(group.options()).amsgrad()) {
        return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
      }
      return {"step", "exp_avg", "exp_avg_sq"};
    case OptimizerKind::AdamW:
      if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad()) {
        return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
      }
      return {"step", "exp_avg", "exp_avg_sq"};
  }
  return {};
}

template <typename AdamState>
void capture_adam_state(const AdamState& s, const std::string& prefix, NamedTensors& out) {
  out.emplace_back(prefix + "step",
                   at::scalar_tensor(static_cast<int64_t>(s.step()), at::TensorOptions().dtype(at::kLong)));
  out.emplace_back(prefix + "exp_avg", s.exp_avg());
  out.emplace_back(prefix + "exp_avg_sq", s.exp_avg_sq());
  if (s.max_exp_avg_sq().defined()) out.emplace_back(prefix + "max_exp_avg_sq", s.max_exp_avg_sq());
}

// A new tensor on the parameter's device with the stored values.
at::Tensor stored_copy(const TensorView& view, const at::Tensor& like) {
  at::Tensor out = at::empty(view.shape, like.options().requires_grad(false));
  if (out.numel() > 0) out.copy_(tensor_over(view));
  return out;
}

// Checks a stored tensor against the tensor it restores into: present, same dtype, same shape, consistent size.
void check_stored(const TensorLookup& stored, const std::string& name, c10::ScalarType type, at::IntArrayRef shape,
                  const char* hint, const char* owner) {
  const TensorView* view = stored.find(name);
  if (!view)
    throw UsageError(fmt::format("checkpoint does not match the {0}: {1} is in the {0} but not in the checkpoint{2}",
                                 owner, name, hint));
  if (view->shape != shape.vec()) {
    throw UsageError(
        fmt::format("checkpoint does not match the {}: {} has shape {} in the checkpoint and {} in the {}{}", owner,
                    name, shape_text(view->shape), shape_text(shape.vec()), owner, hint));
  }
  if (view->dtype != dtype_name(type)) {
    throw UsageError(fmt::format("checkpoint does not match the {}: {} has dtype {} in the checkpoint and {} in the {}",
                                 owner, name, view->dtype, dtype_name(type), owner));
  }
  if (view->nbytes != nbytes_of(view->shape, type) || (view->nbytes > 0 && !view->data)) {
    throw UsageError(fmt::format("checkpoint is inconsistent: {} holds {} bytes, but shape {} of {} needs {}", name,
                                 view->nbytes, shape_text(view->shape), view->dtype, nbytes_of(view->shape, type)));
  }
}

bool is_adam_field(const std::string& field) {
  return field == "step" || field == "exp_avg" || field == "exp_avg_sq" || field == "max_exp_avg_sq";
}

size_t align8(size_t n) { return (n + 7) & ~size_t{7}; }

}  // namespace

std::string dtype_name(c10::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "F32";
    case at::kDouble:
      return "F64";
    case at::kHalf:
      return "F16";
    case at::kBFloat16:
      return "BF16";
    case at::kLong:
      return "I64";
    case at::kInt:
      return "I32";
    case at::kShort:
      return "I16";
    case at::kChar:
      return "I8";
    case at::kByte:
      return "U8";
    case at::kBool:
      return "BOOL";
    default:
      throw Error(fmt::format("checkpoint: tensors of dtype {} cannot be stored", c10::toString(type)));
  }
}

c10::ScalarType scalar_type_of(const std::string& dtype) {
  static const std::pair<const char*, c10::ScalarType> table[] = {
      {"F32", at::kFloat}, {"F64", at::kDouble}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
      {"I32", at::kInt},   {"I16", at::kShort},  {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool}};
  for (const auto& [name, type] : table) {
    if (dtype == name) return type;
  }
  throw UsageError(fmt::format("checkpoint: unknown tensor dtype '{}'", dtype));
}

TensorLookup::~TensorLookup() = default;

at::Tensor tensor_over(const TensorView& view) {
  return at::from_blob(const_cast<void*>(view.data), view.shape, at::TensorOptions().dtype(scalar_type_of(view.dtype)));
}

TensorViewMap::TensorViewMap(std::vector<TensorView> views) : views_(std::move(views)) {
  for (size_t i = 0; i < views_.size(); ++i) {
    if (!index_.emplace(views_[i].name, i).second)
      throw UsageError(fmt::format("checkpoint: tensor {} is stored twice", views_[i].name));
  }
}

std::vector<std::string> TensorViewMap::names() const {
  std::vector<std::string> names;
  names.reserve(views_.size());
  for (const auto& view : views_) names.push_back(view.name);
  return names;
}

const TensorView* TensorViewMap::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &views_[it->second];
}

NamedTensors capture_train_state(Model& model, const torch::optim::Optimizer& optimizer) {
  NamedTensors out;
  const NamedTensors parameters = model.named_parameters();
  for (const auto& [name, p] : parameters) out.emplace_back(kModelPrefix + name, p);
  for (const auto& [name, b] : model.named_buffers()) out.emplace_back(kModelPrefix + name, b);

  const OptimizerKind kind = kind_of(optimizer);
  const auto& state = optimizer.state();
  for (const auto& [name, p] : parameters) {
    const auto it = state.find(torch_compat::optimizer_state_key(state, p));
    if (it == state.end()) continue;  // no step taken for this parameter yet
    const std::string prefix = kOptimPrefix + name + "/";
    const torch::optim::OptimizerParamState* s = it->second.get();
    if (kind == OptimizerKind::Sgd) {
      const auto& sgd = static_cast<const torch::optim::SGDParamState&>(*s);
      if (sgd.momentum_buffer().defined()) out.emplace_back(prefix + "momentum_buffer", sgd.momentum_buffer());
    } else if (kind == OptimizerKind::Adam) {
      capture_adam_state(static_cast<const torch::optim::AdamParamState&>(*s), prefix, out);
    } else {
      capture_adam_state(static_cast<const torch::optim::AdamWParamState&>(*s), prefix, out);
    }
  }
  return out;
}

namespace {

// 1. The model's tensors, in the model's order, are all stored with their dtype and shape; and no stored model
// tensor is missing from the model.
void check_model_tensors(const NamedTensors& model_tensors, const TensorLookup& stored,
                         const std::vector<std::string>& stored_names) {
  std::unordered_set<std::string> model_names;
  for (const auto& [name, t] : model_tensors) {
    check_stored(stored, name, t.scalar_type(), t.sizes(), kShapeHint, "model");
    model_names.insert(name);
  }
  for (const auto& name : stored_names) {
    if (starts_with(name, kModelPrefix) && !model_names.count(name)) {
      throw UsageError(fmt::format(
          "checkpoint does not match the model: {} is in the checkpoint but not in the model{}", name, kShapeHint));
    }
  }
}

// The stored optimizer fields per parameter (optim/<parameter>/<field>), and the parameters in stored order.
struct StoredOptimizerState {
  std::map<std::string, std::set<std::string>> fields;
  std::vector<std::string> order;
};

StoredOptimizerState stored_optimizer_state(const std::vector<std::string>& stored_names) {
  StoredOptimizerState state;
  for (const auto& name : stored_names) {
    if (!starts_with(name, kOptimPrefix)) continue;
    const size_t begin = std::string(kOptimPrefix).size(), slash = name.rfind('/');
    if (slash < begin + 1 || slash + 1 == name.size()) {
      throw UsageError(fmt::format("checkpoint: {} is not named optim/<parameter>/<field>", name));
    }
    const std::string parameter = name.substr(begin, slash - begin);
    if (!state.fields.count(parameter)) state.order.push_back(parameter);
    state.fields[parameter].insert(name.substr(slash + 1));
  }
  return state;
}

// A stored field this optimizer does not have: the message says what the field belongs to.
[[noreturn]] void refuse_foreign_field(OptimizerKind kind, const std::string& prefix, const std::string& field) {
  if (kind == OptimizerKind::Sgd && is_adam_field(field)) {
    throw UsageError(
        fmt::format("checkpoint does not match the optimizer: {}{} is adam/adamw state, but the optimizer is sgd "
                    "(was optim.name changed?)",
                    prefix, field));
  }
  if (kind != OptimizerKind::Sgd && field == "momentum_buffer") {
    throw UsageError(
        fmt::format("checkpoint does not match the optimizer: {}{} is sgd state, but the optimizer is {} "
                    "(was optim.name changed?)",
                    prefix, field, kind_name(kind)));
  }
  if (kind == OptimizerKind::Sgd && field == "momentum_buffer") {
    throw UsageError(
        fmt::format("checkpoint does not match the optimizer: {}{} is sgd momentum state, but this sgd has no "
                    "momentum (was optim.momentum changed?)",
                    prefix, field));
  }
  if (field == "max_exp_avg_sq") {
    throw UsageError(
        fmt::format("checkpoint does not match the optimizer: {}{} is amsgrad state, but this {} does not use amsgrad",
                    prefix, field, kind_name(kind)));
  }
  throw UsageError(fmt::format("checkpoint does not match the optimizer: {}{} is not a state field of {}", prefix,
                               field, kind_name(kind)));
}

// 2. One parameter's stored optimizer state is none, or exactly the fields `want` with the right dtypes and shapes.
void check_parameter_state(OptimizerKind kind, const std::string& name, const at::Tensor& p,
                           const std::set<std::string>& have, const std::vector<std::string>& want,
                           const TensorLookup& stored) {
  const std::string prefix = kOptimPrefix + name + "/";
  for (const auto& field : have) {
    if (std::find(want.begin(), want.end(), field) == want.end()) refuse_foreign_field(kind, prefix, field);
  }
  for (const auto& field : want) {
    const std::string full = prefix + field;
    if (!have.count(field)) {
      throw UsageError(
          fmt::format("checkpoint does not match the optimizer: {} is missing from the checkpoint, which has other {} "
                      "state of {}{}",
                      full, kind_name(kind), name, field == "max_exp_avg_sq" ? " (the optimizer uses amsgrad)" : ""));
    }
    if (field == "step") {
      check_stored(stored, full, at::kLong, {}, "", "optimizer");
    } else {
      check_stored(stored, full, p.scalar_type(), p.sizes(), "", "optimizer");
    }
  }
}

// 3. One parameter's optimizer state from the stored fields (all checked).
std::unique_ptr<torch::optim::OptimizerParamState> restored_parameter_state(OptimizerKind kind, const std::string& name,
                                                                            const at::Tensor& p,
                                                                            std::size_t field_count,
                                                                            const TensorLookup& stored) {
  const std::string prefix = kOptimPrefix + name + "/";
  auto field = [&](const char* f) { return stored_copy(*stored.find(prefix + f), p); };
  auto step = [&] {
    int64_t value = 0;
    std::memcpy(&value, stored.find(prefix + "step")->data, sizeof value);
    return value;
  };
  auto adam_like = [&](auto state) {
    state->step(step());
    state->exp_avg(field("exp_avg"));
    state->exp_avg_sq(field("exp_avg_sq"));
    if (field_count == 4) state->max_exp_avg_sq(field("max_exp_avg_sq"));
    return state;
  };
  switch (kind) {
    case OptimizerKind::Sgd: {
      auto state = std::make_unique<torch::optim::SGDParamState>();
      state->momentum_buffer(field("momentum_buffer"));
      return state;
    }
    case OptimizerKind::Adam:
      return adam_like(std::make_unique<torch::optim::AdamParamState>());
    case OptimizerKind::AdamW:
      return adam_like(std::make_unique<torch::optim::AdamWParamState>());
  }
  throw Error("internal error: unknown optimizer kind");
}

}  // namespace

void restore_train_state(Model& model, torch::optim::Optimizer& optimizer, const TensorLookup& stored) {
  const NamedTensors parameters = model.named_parameters();
  NamedTensors model_tensors;
  for (const auto& [name, p] : parameters) model_tensors.emplace_back(kModelPrefix + name, p);
  for (const auto& [name, b] : model.named_buffers()) model_tensors.emplace_back(kModelPrefix + name, b);
  const std::vector<std::string> stored_names = stored.names();
  check_model_tensors(model_tensors, stored, stored_names);

  // The optimizer state: per parameter none or exactly this optimizer's fields; none for a parameter the model lacks.
  const OptimizerKind kind = kind_of(optimizer);
  const StoredOptimizerState stored_state = stored_optimizer_state(stored_names);
  std::vector<std::vector<std::string>> restored_fields(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) {
    const auto& [name, p] = parameters[i];
    const auto found = stored_state.fields.find(name);
    if (found == stored_state.fields.end()) continue;  // no state stored for this parameter: it starts afresh
    restored_fields[i] = fields_of(kind, group_of(optimizer, name, p));
    check_parameter_state(kind, name, p, found->second, restored_fields[i], stored);
  }
  std::unordered_set<std::string> parameter_names;
  for (const auto& [name, p] : parameters) parameter_names.insert(name);
  for (const auto& parameter : stored_state.order) {
    if (!parameter_names.count(parameter)) {
      throw UsageError(fmt::format(
          "checkpoint does not match the model: {}{}/{} is in the checkpoint, but the model has no parameter {}{}",
          kOptimPrefix, parameter, *stored_state.fields.at(parameter).begin(), parameter, kShapeHint));
    }
  }

  // Everything matches: copy.
  at::NoGradGuard no_grad;
  for (auto& [name, t] : model_tensors) {
    if (t.numel() > 0) t.copy_(tensor_over(*stored.find(name)));
  }
  auto& state = optimizer.state();
  for (size_t i = 0; i < parameters.size(); ++i) {
    const auto& [name, p] = parameters[i];
    const auto key = torch_compat::optimizer_state_key(state, p);
    state.erase(key);
    if (!restored_fields[i].empty())
      state[key] = restored_parameter_state(kind, name, p, restored_fields[i].size(), stored);
  }
}

StateSnapshot::StateSnapshot() = default;
StateSnapshot::~StateSnapshot() = default;

void StateSnapshot::take(const NamedTensors& tensors) {
  // Layout: each tensor at the next multiple of 8.
  std::vector<SnapshotEntry> entries;
  entries.reserve(tensors.size());
  size_t cursor = 0;
  bool any_cuda = false;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) throw Error(fmt::format("checkpoint: {} is an undefined tensor", name));
    SnapshotEntry entry;
    entry.name = name;
    entry.dtype = dtype_name(t.scalar_type());
    entry.shape = t.sizes().vec();
    entry.offset = align8(cursor);
    entry.nbytes = static_cast<size_t>(t.numel()) * t.element_size();
    cursor = entry.offset + entry.nbytes;
    any_cuda = any_cuda || t.is_cuda();
    entries.push_back(std::move(entry));
  }
  const size_t total = cursor;

  // The buffer: reused while the size is unchanged (and pinned when a GPU tensor is copied in a CUDA build).
  bool want_pinned = false;
#ifdef MGTRAIN_WITH_CUDA
  want_pinned = any_cuda;
#endif
  if (total > 0 && (!buffer_.defined() || static_cast<size_t>(buffer_.numel()) != total || (want_pinned && !pinned_))) {
    buffer_ = at::Tensor();  // release the old one first
    buffer_ = at::empty({static_cast<int64_t>(total)}, at::TensorOptions().dtype(at::kByte).pinned_memory(want_pinned));
    pinned_ = want_pinned;
    ++allocations_;
  }
  size_ = total;
  entries_ = std::move(entries);
  if (total == 0) return;

  uint8_t* base = buffer_.data_ptr<uint8_t>();
  size_t end_of_previous = 0;
  std::set<c10::DeviceIndex> cuda_devices;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i].second;
    const SnapshotEntry& entry = entries_[i];
    std::memset(base + end_of_previous, 0, entry.offset - end_of_previous);  // padding: deterministic bytes
    end_of_previous = entry.offset + entry.nbytes;
    if (entry.nbytes == 0) continue;
    if (t.is_cpu() && t.is_contiguous()) {
      const auto* src = static_cast<const uint8_t*>(t.data_ptr());
      uint8_t* dst = base + entry.offset;
      constexpr int64_t kGrain = int64_t{4} << 20;  // bytes per thread at least
      at::parallel_for(0, static_cast<int64_t>(entry.nbytes), kGrain, [&](int64_t begin, int64_t end) {
        std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin));
      });
      continue;
    }
    // A view of the buffer's own storage (so a pinned buffer stays known as pinned) with the tensor's dtype and shape.
    at::Tensor dst = buffer_.narrow(0, static_cast<int64_t>(entry.offset), static_cast<int64_t>(entry.nbytes))
                         .view(t.scalar_type())
                         .view(t.sizes());
    const bool async = t.is_cuda();
    dst.copy_(t, /*non_blocking=*/async);
    if (async) cuda_devices.insert(t.device().index());
  }
  for (c10::DeviceIndex device : cuda_devices) torch::cuda::synchronize(device);
}

std::vector<TensorView> StateSnapshot::views() const {
  std::vector<TensorView> views;
  views.reserve(entries_.size());
  const uint8_t* base = data();
  for (const auto& e : entries_)
    views.push_back(TensorView{e.name, e.dtype, e.shape, base ? base + e.offset : nullptr, e.nbytes});
  return views;
}

const uint8_t* StateSnapshot::data() const { return buffer_.defined() ? buffer_.data_ptr<uint8_t>() : nullptr; }

}  // namespace mgtrain
