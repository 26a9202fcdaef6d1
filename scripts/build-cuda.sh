#!/usr/bin/env bash
# Builds mgtrain against a CUDA LibTorch (the NCCL backend, fp16 with loss scaling, ddp.strategy dp), into
# build-cuda/ (or $MGTRAIN_BUILD_DIR). The LibTorch is named by its CMake prefix, or taken from a pip-installed torch:
#   scripts/build-cuda.sh /opt/libtorch/share/cmake          (an unpacked libtorch zip: <libtorch>/share/cmake)
#   scripts/build-cuda.sh                                     (python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
#   scripts/build-cuda.sh PREFIX TARGET...                    (only these targets)
# The build refuses a LibTorch without CUDA (that is the default build: scripts/build.sh). See docs/gpu.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MGTRAIN_BUILD_DIR:-build-cuda}
prefix=${1:-}
if [[ -z "$prefix" ]]; then
  if ! prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null); then
    echo "build-cuda.sh: no LibTorch prefix given and python3 cannot import torch; pass the CMake prefix of a CUDA LibTorch," >&2
    echo "  e.g. scripts/build-cuda.sh /opt/libtorch/share/cmake" >&2
    exit 2
  fi
  echo "build-cuda.sh: using the pip torch's LibTorch at $prefix" >&2
fi
shift || true
if [[ ! -d "$prefix" ]]; then
  echo "build-cuda.sh: $prefix is not a directory (want the CMake prefix holding Torch/TorchConfig.cmake)" >&2
  exit 2
fi
if [[ ! -f "$prefix/Torch/TorchConfig.cmake" && ! -f "$prefix/TorchConfig.cmake" ]]; then
  echo "build-cuda.sh: no TorchConfig.cmake under $prefix (want e.g. <libtorch>/share/cmake)" >&2
  exit 2
fi
# The gloo headers ProcessGroupGloo.hpp needs ship inside LibTorch's include directory (<prefix>/../../include).
extra=()
torch_root=$(cd "$prefix/../.." && pwd)
if [[ -f "$torch_root/include/gloo/config.h" ]]; then extra+=(-DGLOO_INCLUDE_DIR="$torch_root/include"); fi
# LibTorch must use the C++11 ABI, like the Debian libraries mgtrain links (fmt, yaml-cpp): the libtorch zip's
# "cxx11 ABI" variant, or a pip torch from 2.7 on. An old-ABI LibTorch fails at link time with undefined std::string symbols.
if grep -rqs "_GLIBCXX_USE_CXX11_ABI=0" "$prefix/Torch/TorchConfig.cmake" "$torch_root/share/cmake/Torch/TorchConfig.cmake"; then
  echo "build-cuda.sh: warning: this LibTorch may use the pre-C++11 ABI (_GLIBCXX_USE_CXX11_ABI=0); linking may fail (see docs/gpu.md)" >&2
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" "${extra[@]}" ${MGTRAIN_CMAKE_ARGS:-} |
  tee "$build.configure.log"
if ! grep -q "with CUDA: building the NCCL path" "$build.configure.log"; then
  rm -f "$build.configure.log"
  echo "build-cuda.sh: the LibTorch under $prefix has no CUDA (torch_cuda not found); use a CUDA build of LibTorch/torch" >&2
  exit 2
fi
rm -f "$build.configure.log"
targets=()
if [[ $# -gt 0 ]]; then targets=(--target "$@"); fi
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
echo "build-cuda.sh: built $build/bin/mgtrain and $build/bin/mgtrain-worker with CUDA; check with: $build/bin/mgtrain env" >&2
