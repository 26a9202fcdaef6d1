#!/usr/bin/env bash
# Installs the Debian bookworm packages mgtrain needs, and only those that are missing.
# Usage: scripts/install-deps.sh [--test]    (--test adds what the test suite uses)
# Needs root (or sudo) only when something is missing; re-runs are a no-op.
# libopenblas0-openmp: Debian's LibTorch calls the system BLAS, which is otherwise the slow reference one.
# libcpp-httplib-dev: the launcher's status API (docs/monitoring.md).
# nlohmann-json3-dev, libxxhash-dev: header-only JSON and XXH64 (no shared library at start-up).
# libcairo2-dev: mgtrain-plot, the renderer of `mgtrain plot` (optional: without it the rest builds).
# patchelf: scripts/device/pack.sh points the GPU bundle's binaries at the bundle's own lib/.
# python3-venv: the main flavour's virtual environment with PyPI's torch (scripts/torch2-env.sh).
# ccache: rebuilds of files compiled before are cache lookups (scripts/compiler-cache.sh).
# elfutils: eu-stack, which the launcher runs (as a program; nothing links libdw) for the native frames of stack
# dumps (lib/diagnose/stack_dump.hpp); without it dumps have Python frames only, with a note.
set -euo pipefail

build_packages=(g++ cmake ninja-build pkg-config libtorch-dev libgloo-dev libcli11-dev libyaml-cpp-dev libfmt-dev
                catch2 zlib1g-dev dataset-fashion-mnist libopenblas0-openmp libcairo2-dev
                libcpp-httplib-dev libsodium-dev nlohmann-json3-dev libxxhash-dev patchelf python3-venv elfutils
                ccache)
# python3-torch: torchrun and Python DDP for compatibility tests; iproute2: network namespaces;
# procps: ps/pgrep in tests; time: /usr/bin/time for benchmarks; clang + libclang-rt-14-dev: the libFuzzer
# target (tests/fuzz); slurmctld slurmd slurm-client munge: a SLURM cluster on this machine (tests/slurm);
# chromium: the status dashboard's screenshot test (tests/integration/dashboard_screenshot.sh).
# python3-protobuf: test_run_metrics parses the TensorBoard event files with the real protobuf library.
# clang-format clang-tidy: the house style and the static checks (.clang-format, .clang-tidy; scripts/check).
test_packages=(python3-torch iproute2 procps time clang libclang-rt-14-dev slurmctld slurmd slurm-client munge chromium
               python3-protobuf clang-format clang-tidy)

wanted=("${build_packages[@]}")
if [[ "${1:-}" == "--test" ]]; then wanted+=("${test_packages[@]}"); fi

missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
