#!/usr/bin/env bash
# Configures (once) and builds mgtrain in Release with Ninja into build/ (or $MGTRAIN_BUILD_DIR).
# Usage: scripts/build.sh [TARGET...]   (no target: everything, tests included)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MGTRAIN_BUILD_DIR:-build}
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${MGTRAIN_CMAKE_ARGS:-}
fi
targets=()
if [[ $# -gt 0 ]]; then targets=(--target "$@"); fi
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
