#!/usr/bin/env bash
# A CUDA toolkit from PyPI for a machine without one (no /usr/local/cuda): scripts/build-torch2.sh calls it to compile
# against the CUDA LibTorch of a torch venv. Installs NVIDIA's nvcc and NVVM wheels of the CUDA release (major.minor)
# of the runtime wheel that torch brought (nvidia-cuda-runtime; the newest patch of that release, the same for both:
# nvcc and NVVM ship in lockstep), and makes <venv>/cuda-toolkit: a toolkit-shaped view of the wheels
# (bin/nvcc, include/ with the runtime's and cuBLAS' headers, lib64/ with the unversioned .so names CMake's
# FindCUDAToolkit looks for) that CMake takes as CUDAToolkit_ROOT. Prints its path. About 60 MB, downloaded once.
#   scripts/cuda-from-pypi.sh VENV
set -euo pipefail
venv=${1:?usage: scripts/cuda-from-pypi.sh VENV}
say() { echo "cuda-from-pypi.sh: $*" >&2; }
python=$venv/bin/python
[[ -x $python ]] || { say "no Python in $venv"; exit 2; }
facts=$("$python" -c 'import importlib.metadata as m, os, torch
print(m.version("nvidia-cuda-runtime"))
print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia"))' 2>/dev/null) ||
  { say "the torch in $venv brought no nvidia-cuda-runtime wheel (a CPU torch?)"; exit 2; }
{ read -r runtime; read -r nvidia; } <<<"$facts"
cuda_major=${runtime%%.*}
release=$(cut -d. -f1,2 <<<"$runtime")  # e.g. 13.2
wheels=$nvidia/cu$cuda_major
view=$venv/cuda-toolkit

installed() { "$python" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || true; }
nvcc_installed=$(installed nvidia-cuda-nvcc) nvvm_installed=$(installed nvidia-nvvm)
# nvcc and NVVM (cicc) of one release, torch's: a newer NVVM writes PTX that an older ptxas refuses (pip would pull
# the newest NVVM for nvcc otherwise).
if [[ "${nvcc_installed%.*}" != "$release" || "$nvvm_installed" != "$nvcc_installed" ]]; then
  say "installing nvidia-cuda-nvcc and nvidia-nvvm $release.* (CUDA's compiler, torch's CUDA release) into $venv"
  log=$(mktemp)
  if ! "$python" -m pip install --disable-pip-version-check --no-input "nvidia-cuda-nvcc==$release.*" \
       "nvidia-nvvm==$release.*" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    rm -f "$log"
    say "pip could not install CUDA's compiler from PyPI (above); or install the CUDA $cuda_major toolkit and set MGTRAIN_CUDA_HOME"
    exit 1
  fi
  rm -f "$log"
fi
[[ -x $wheels/bin/nvcc && -f $wheels/include/cuda_runtime.h ]] ||
  { say "no nvcc or cuda_runtime.h under $wheels after the install"; exit 1; }

# The view: links only, rebuilt each time (cheap), so that it follows the wheels.
rm -rf "$view"
mkdir -p "$view/lib64"
ln -s "$wheels/bin" "$view/bin"
ln -s "$wheels/include" "$view/include"
for lib in "$wheels"/lib/lib*.so.*; do
  name=${lib##*/}
  ln -sf "$lib" "$view/lib64/$name"
  ln -sf "$lib" "$view/lib64/${name%%.so.*}.so"
done
echo "$view"
