// Every difference between the LibTorch versions mgtrain builds against (Debian's 1.13 and current 2.x)
// lives here, so the rest of the code is written once.
#pragma once

#include <torch/version.h>

#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <c10/macros/Export.h>
#include <torch/csrc/autograd/variable.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#define MGTRAIN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if MGTRAIN_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

// The autocast functions used below, declared as <ATen/autocast_mode.h> declares them (that header pulls in all of
// ATen's operator declarations, too much for a header included this widely).
namespace at::autocast {
#if MGTRAIN_TORCH_AT_LEAST(2, 4)
TORCH_API bool is_autocast_enabled(c10::DeviceType device_type);
TORCH_API void set_autocast_enabled(c10::DeviceType device_type, bool enabled);
TORCH_API c10::ScalarType get_autocast_dtype(c10::DeviceType device_type);
TORCH_API void set_autocast_dtype(c10::DeviceType device_type, c10::ScalarType dtype);
#else
TORCH_API bool is_enabled();
TORCH_API void set_enabled(bool enabled);
TORCH_API bool is_cpu_enabled();
TORCH_API void set_cpu_enabled(bool enabled);
TORCH_API c10::ScalarType get_autocast_gpu_dtype();
TORCH_API c10::ScalarType get_autocast_cpu_dtype();
TORCH_API void set_autocast_gpu_dtype(c10::ScalarType dtype);
TORCH_API void set_autocast_cpu_dtype(c10::ScalarType dtype);
#endif
TORCH_API void clear_cache();
}  // namespace at::autocast

namespace mgtrain::torch_compat {

inline constexpr const char* kTorchVersion = TORCH_VERSION;

// The optional type LibTorch's signatures take (e.g. torch::autograd::Function::forward's optional tensors,
// Module::clone's device). 1.13 has its own c10::optional; 2.x made c10::optional/c10::nullopt deprecated aliases of
// std::optional/std::nullopt.
#if MGTRAIN_TORCH_AT_LEAST(2, 0)
template <typename T>
using optional = std::optional<T>;
inline constexpr std::nullopt_t nullopt = std::nullopt;
#else
template <typename T>
using optional = c10::optional<T>;
inline constexpr c10::nullopt_t nullopt = c10::nullopt;
#endif

// The object that runs collectives: in 1.13 ProcessGroupGloo/NCCL derive from ProcessGroup, in 2.x from Backend.
#if MGTRAIN_TORCH_AT_LEAST(2, 0)
using CollectiveBackend = c10d::Backend;
#else
using CollectiveBackend = c10d::ProcessGroup;
#endif

using WorkHandle = c10::intrusive_ptr<c10d::Work>;

// An owning pointer to an autograd Node, as torch::autograd::impl::grad_accumulator returns it: std::shared_ptr in 1.13
// and most of 2.x, c10::intrusive_ptr in recent 2.x (2.15). Read off the function, so it is right for either.
using AutogradNodePtr = decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));

// The key of parameter p in torch::optim::Optimizer::state(): 1.13 keys the map by the TensorImpl pointer printed as
// a string (c10::guts::to_string(p.unsafeGetTensorImpl()), i.e. ostream << pointer), later 2.x by the pointer itself
// (void*). The key type is read off the map passed in, so this is right for whichever LibTorch it is compiled against.
// Use: optimizer.state().find(torch_compat::optimizer_state_key(optimizer.state(), p)).
template <typename StateMap>
typename StateMap::key_type optimizer_state_key(const StateMap& /*state*/, const at::Tensor& parameter) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream key;
    key << static_cast<const void*>(parameter.unsafeGetTensorImpl());
    return key.str();
  } else {
    return static_cast<Key>(parameter.unsafeGetTensorImpl());
  }
}

// Autocast per device type. 2.4 made the API device-generic (set_autocast_enabled(DeviceType, bool),
// set_autocast_dtype(DeviceType, ScalarType)) and deprecated 1.13's per-device functions (set_enabled for CUDA,
// set_cpu_enabled, set_autocast_gpu_dtype, set_autocast_cpu_dtype); only CPU and CUDA are used here.
inline bool autocast_enabled(c10::DeviceType device) {
#if MGTRAIN_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline at::ScalarType autocast_dtype(c10::DeviceType device) {
#if MGTRAIN_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void set_autocast(c10::DeviceType device, bool enabled, at::ScalarType dtype) {
#if MGTRAIN_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, dtype);
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

// Initialises CUDA (and with it the caching allocator) now rather than at the first CUDA tensor, so allocator settings
// such as setMemoryFraction can be applied first: at::Context::lazyInitCUDA() in 1.13, lazyInitDevice(kCUDA) once 2.x
// deprecated it. Detected on the type, so either LibTorch compiles only the call it has.
template <typename Context, typename = void>
struct has_lazy_init_device : std::false_type {};
template <typename Context>
struct has_lazy_init_device<Context,
                            std::void_t<decltype(std::declval<Context&>().lazyInitDevice(c10::DeviceType::CUDA))>>
    : std::true_type {};

template <typename Context = at::Context>
void lazy_init_cuda(Context& context = at::globalContext()) {
  if constexpr (has_lazy_init_device<Context>::value) {
    context.lazyInitDevice(c10::DeviceType::CUDA);
  } else {
    context.lazyInitCUDA();
  }
}

// Shuts a process-group backend down in order at exit: torch >= 2.4's ProcessGroupNCCL warns (and may hang) when it is
// destroyed without shutdown(). Backends that have no shutdown() (1.13) need nothing.
template <typename Group, typename = void>
struct has_shutdown : std::false_type {};
template <typename Group>
struct has_shutdown<Group, std::void_t<decltype(std::declval<Group&>().shutdown())>> : std::true_type {};

template <typename Group>
void shutdown_backend(Group& group) {
  if constexpr (has_shutdown<Group>::value) group.shutdown();
}

}  // namespace mgtrain::torch_compat
