// Every difference between the LibTorch versions mgtrain builds against (Debian's 1.13 and current 2.x)
// lives here, so the rest of the code is written once.
#pragma once

#include <torch/version.h>

#include <sstream>
#include <string>
#include <type_traits>

#include <ATen/core/Tensor.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#define MGTRAIN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if MGTRAIN_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace mgtrain::torch_compat {

inline constexpr const char* kTorchVersion = TORCH_VERSION;

// The object that runs collectives: in 1.13 ProcessGroupGloo/NCCL derive from ProcessGroup, in 2.x from Backend.
#if MGTRAIN_TORCH_AT_LEAST(2, 0)
using CollectiveBackend = c10d::Backend;
#else
using CollectiveBackend = c10d::ProcessGroup;
#endif

using WorkHandle = c10::intrusive_ptr<c10d::Work>;

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

}  // namespace mgtrain::torch_compat
