#!/usr/bin/env bash
# The main build flavour (scripts/build.sh's default): mgtrain against a LibTorch 2.x with CUDA (NCCL path, fp16,
# ddp.strategy dp compiled and linked; nothing needs a GPU to build), into ${MGTRAIN_TORCH2_BUILD_DIR:-build}.
# The fallback flavour, Debian's LibTorch 1.13 (CPU only), is MGTRAIN_FLAVOUR=debian scripts/build.sh.
#   scripts/build-torch2.sh [TARGET...]     (no target: everything, tests included)
# The LibTorch is PyPI's torch wheel (version: scripts/torch2-version, or the file MGTRAIN_TORCH2_VERSION_FILE names,
# e.g. scripts/device/torch-version for the GPU bundle) in the venv of scripts/torch2-env.sh, created on first use.
# MGTRAIN_TORCH_PREFIX=<libtorch>/share/cmake uses another LibTorch instead (scripts/build-cuda.sh).
# The CUDA toolkit (nvcc, headers) is ${MGTRAIN_CUDA_HOME:-/usr/local/cuda}; its CUDA major must be torch's. A pip
# torch on a machine without one (or with another major) gets nvcc and NVVM from PyPI (scripts/cuda-from-pypi.sh).
# Every torch library must resolve into the wheel (checked by CMake at configure time and by
# tests/integration/check_torch_libraries.sh on the linked worker, also a ctest test of this flavour). See docs/gpu.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/compiler-cache.sh
build=${MGTRAIN_TORCH2_BUILD_DIR:-build}
cuda_home=${MGTRAIN_CUDA_HOME:-/usr/local/cuda}
say() { echo "build-torch2.sh: $*" >&2; }
die() { say "$*"; exit 2; }

torch_version="" torch_cuda="" venv=""
if [[ -n "${MGTRAIN_TORCH_PREFIX:-}" ]]; then
  prefix=$MGTRAIN_TORCH_PREFIX
  [[ -f "$prefix/Torch/TorchConfig.cmake" ]] || die "no Torch/TorchConfig.cmake under MGTRAIN_TORCH_PREFIX=$prefix (want <libtorch>/share/cmake)"
  torch_root=$(cd "$prefix/../.." && pwd)
  if grep -qs "_GLIBCXX_USE_CXX11_ABI=0" "$prefix/Torch/TorchConfig.cmake"; then
    say "warning: this LibTorch may use the pre-C++11 ABI (_GLIBCXX_USE_CXX11_ABI=0); linking Debian's libraries may fail"
  fi
  # An unpacked libtorch zip says e.g. "2.8.0+cu129" in build-version.
  if [[ -f "$torch_root/build-version" ]]; then
    bv=$(cat "$torch_root/build-version")
    torch_version=${bv%%+*}
    if [[ "$bv" =~ \+cu([0-9]+)([0-9])$ ]]; then torch_cuda="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"; fi
  fi
else
  venv=$(scripts/torch2-env.sh ${MGTRAIN_TORCH2_VERSION_FILE:+"$MGTRAIN_TORCH2_VERSION_FILE"})
  facts=$("$venv/bin/python" -c 'import os, torch
print(torch.__version__.split("+")[0]); print(torch.version.cuda or "")
print(torch.utils.cmake_prefix_path); print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
  { read -r torch_version; read -r torch_cuda; read -r prefix; read -r torch_root; read -r abi; } <<<"$facts"
  [[ "$abi" == 1 ]] || die "torch $torch_version in $venv uses the pre-C++11 ABI; mgtrain links Debian's C++11-ABI libraries"
  [[ -n "$torch_cuda" ]] || die "torch $torch_version in $venv has no CUDA (a CPU wheel); this flavour needs the CUDA build"
fi

# The toolkit must match torch's CUDA major (TorchConfig's cuda.cmake compiles against its headers; the wheel's
# runtime is what runs).
nvcc_version() { "$1" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p'; }
# Without a toolkit of torch's CUDA major here (none given by MGTRAIN_CUDA_HOME, none at /usr/local/cuda, or another
# major there), a pip torch gets one from PyPI: nvcc and NVVM wheels at its CUDA runtime's version, in its venv.
if [[ -z "${MGTRAIN_CUDA_HOME:-}" && -n "$venv" ]]; then
  found=$(nvcc_version "$cuda_home/bin/nvcc")
  if [[ -z "$found" || "${found%%.*}" != "${torch_cuda%%.*}" ]]; then
    say "no CUDA ${torch_cuda%%.*} toolkit at $cuda_home${found:+ (it has CUDA $found)}: using PyPI's (scripts/cuda-from-pypi.sh)"
    cuda_home=$(scripts/cuda-from-pypi.sh "$venv") || die "no CUDA toolkit: PyPI's could not be installed (above)"
  fi
fi
nvcc="$cuda_home/bin/nvcc"
[[ -x "$nvcc" ]] || die "no nvcc at $nvcc: install the CUDA toolkit there or set MGTRAIN_CUDA_HOME"
nvcc_cuda=$(nvcc_version "$nvcc")
[[ -n "$nvcc_cuda" ]] || die "cannot read the CUDA version from '$nvcc --version'"
if [[ -n "$torch_cuda" && "${torch_cuda%%.*}" != "${nvcc_cuda%%.*}" ]]; then
  die "torch $torch_version is built for CUDA $torch_cuda but $nvcc is CUDA $nvcc_cuda: the CUDA major versions must match" \
      "(install CUDA ${torch_cuda%%.*}.x, or pin a torch for CUDA ${nvcc_cuda%%.*} in scripts/torch2-version)"
fi
# CUDA 12.9 dropped nvToolsExt (NVTX2), which LibTorch before 2.8 links (torch::nvtoolsext): it cannot configure.
version_lt() { [[ "$1" != "$2" && "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" == "$1" ]]; }
if [[ -n "$torch_version" ]] && version_lt "$torch_version" 2.8 && ! version_lt "$nvcc_cuda" 12.9; then
  die "torch $torch_version (< 2.8) needs nvToolsExt, which CUDA $nvcc_cuda (>= 12.9) no longer ships; use torch >= 2.8"
fi

# TORCH_CUDA_ARCH_LIST: mgtrain compiles no CUDA kernels, so this only silences Caffe2's cuda.cmake, which otherwise
# probes for a GPU and, without one, lists every architecture it knows. 8.0 (A100) and 9.0 (H100/H200) are the GPUs
# this project runs on; the wheel's own kernels cover more (torch.cuda.get_arch_list()) and are unaffected.
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-8.0;9.0}
say "torch ${torch_version:-?} (CUDA ${torch_cuda:-?}) at $torch_root, nvcc CUDA $nvcc_cuda, build dir $build"

# A folder configured for another LibTorch (Debian's, or another torch version) is configured afresh: CMake would keep
# finding the Torch package it cached.
configured=$(sed -n 's/^MGTRAIN_TORCH_ROOT:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [[ -f "$build/CMakeCache.txt" && "$configured" != "$torch_root" ]]; then
  say "$build was configured for ${configured:-the Debian LibTorch}; reconfiguring it for $torch_root"
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
log="$build.configure.log"
start=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGTRAIN_TORCH_ROOT="$torch_root" \
  -DMGTRAIN_REFERENCE_TORCHRUN="${venv:+$venv/bin/torchrun}" -DCUDAToolkit_ROOT="$cuda_home" -DCMAKE_CUDA_COMPILER="$nvcc" -DTORCH_CUDA_ARCH_LIST="$TORCH_CUDA_ARCH_LIST" \
  "${compiler_cache_args[@]}" \
  ${MGTRAIN_CMAKE_ARGS:-} >"$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; die "configure failed (above)"; }
grep -E "^-- (mgtrain|Found Torch|PyTorch: CUDA detected)" "$log" >&2 || true
if ! grep -q "with CUDA: building the NCCL path" "$log"; then
  grep "mgtrain: LibTorch" "$log" >&2 || true
  rm -f "$log"
  die "the LibTorch at $torch_root has no usable CUDA/NCCL (see the line above); this flavour needs both"
fi
rm -f "$log"
say "configured in $(( $(date +%s) - start )) s"

targets=()
if [[ $# -gt 0 ]]; then targets=(--target "$@"); fi
start=$(date +%s)
cmake --build "$build" -j "${MGTRAIN_JOBS:-$(nproc)}" "${targets[@]}"
say "built in $(( $(date +%s) - start )) s"
if [[ -f "$build/bin/mgtrain-worker" ]]; then
  tests/integration/check_torch_libraries.sh "$build/bin/mgtrain-worker" "$torch_root"
fi
say "done: $build/bin/mgtrain and $build/bin/mgtrain-worker (LibTorch ${torch_version:-?} with CUDA); tests: ctest --test-dir $build"
