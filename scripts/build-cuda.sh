#!/usr/bin/env bash
# Builds mgtrain against a CUDA LibTorch that you provide (the NCCL backend, fp16 with loss scaling, ddp.strategy dp),
# into build-cuda/ (or $MGTRAIN_BUILD_DIR). A thin wrapper of scripts/build-torch2.sh, which does the work and the
# checks (CUDA major of torch vs nvcc, every torch library from that LibTorch, Debian's fmt before torch's):
#   scripts/build-cuda.sh /opt/libtorch/share/cmake          (an unpacked libtorch zip, cxx11 ABI: <libtorch>/share/cmake)
#   scripts/build-cuda.sh                                     (python3's torch: torch.utils.cmake_prefix_path)
#   scripts/build-cuda.sh PREFIX TARGET...                    (only these targets)
# Without a LibTorch of your own, scripts/build-torch2.sh installs the pinned pip torch in a venv. See docs/gpu.md.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-}
if [[ -z "$prefix" ]]; then
  if ! prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null); then
    echo "build-cuda.sh: no LibTorch prefix given and python3 cannot import torch; pass the CMake prefix of a CUDA LibTorch," >&2
    echo "  e.g. scripts/build-cuda.sh /opt/libtorch/share/cmake (or use scripts/build-torch2.sh)" >&2
    exit 2
  fi
  echo "build-cuda.sh: using the pip torch's LibTorch at $prefix" >&2
fi
shift || true
if [[ ! -f "$prefix/Torch/TorchConfig.cmake" ]]; then
  echo "build-cuda.sh: no Torch/TorchConfig.cmake under $prefix (want e.g. <libtorch>/share/cmake)" >&2
  exit 2
fi
export MGTRAIN_TORCH_PREFIX=$prefix
export MGTRAIN_TORCH2_BUILD_DIR=${MGTRAIN_BUILD_DIR:-build-cuda}
exec scripts/build-torch2.sh "$@"
