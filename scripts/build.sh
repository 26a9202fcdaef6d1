#!/usr/bin/env bash
# Configures and builds mgtrain in Release with Ninja, in one of two flavours (MGTRAIN_FLAVOUR):
#   torch2 (the default): LibTorch 2.x with CUDA from PyPI's torch wheel, the LibTorch users run (NCCL, fp16, current
#                         CPU kernels), into build/ (scripts/build-torch2.sh does the work; the wheel is downloaded
#                         once into a cached venv)
#   debian:               Debian's LibTorch 1.13 (CPU only), the zero-download fallback, into build-debian/
# MGTRAIN_BUILD_DIR chooses another folder. Re-runs are incremental; a folder configured for the other flavour (or
# another LibTorch) is reconfigured.
# Usage: scripts/build.sh [TARGET...]   (no target: everything, tests included)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/compiler-cache.sh
flavour=${MGTRAIN_FLAVOUR:-torch2}
targets=()
if [[ $# -gt 0 ]]; then targets=(--target "$@"); fi
case $flavour in
  torch2)
    MGTRAIN_TORCH2_BUILD_DIR=${MGTRAIN_BUILD_DIR:-build} exec scripts/build-torch2.sh "$@" ;;
  debian)
    build=${MGTRAIN_BUILD_DIR:-build-debian}
    if grep -qs '^MGTRAIN_TORCH_ROOT:[A-Z]*=.' "$build/CMakeCache.txt"; then
      echo "build.sh: $build was configured for a pip LibTorch; reconfiguring it for Debian's" >&2
      rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
    fi
    if [[ ! -f "$build/build.ninja" ]]; then
      cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${compiler_cache_args[@]}" ${MGTRAIN_CMAKE_ARGS:-}
    fi
    cmake --build "$build" -j "$(nproc)" "${targets[@]}" ;;
  *)
    echo "build.sh: MGTRAIN_FLAVOUR=$flavour: expected torch2 (the default: PyPI's LibTorch 2.x) or debian (Debian's 1.13)" >&2
    exit 2 ;;
esac
