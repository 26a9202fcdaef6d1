// Every difference between the LibTorch versions mgtrain builds against (Debian's 1.13 and current 2.x)
// lives here, so the rest of the code is written once.
#pragma once

#include <torch/version.h>

#define MGTRAIN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace mgtrain::torch_compat {

inline constexpr const char* kTorchVersion = TORCH_VERSION;

}  // namespace mgtrain::torch_compat
