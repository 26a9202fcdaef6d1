// Every difference between the LibTorch versions mgtrain builds against (Debian's 1.13 and current 2.x)
// lives here, so the rest of the code is written once.
#pragma once

#include <torch/version.h>

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

}  // namespace mgtrain::torch_compat
