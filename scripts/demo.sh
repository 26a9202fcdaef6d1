#!/usr/bin/env bash
# The main job from nothing: install what is missing, build in Release, and train on the default config
# with two worker processes. Re-runs are incremental.
# Usage: scripts/demo.sh [extra mgtrain launch arguments, e.g. train.epochs=1]
#   MGTRAIN_FLAVOUR=debian scripts/demo.sh: Debian's LibTorch 1.13 (no download beyond Debian) in build-debian/,
#   instead of PyPI's LibTorch 2.x in build/ (scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh mgtrain mgtrain-worker
default_build=build
[[ ${MGTRAIN_FLAVOUR:-torch2} != debian ]] || default_build=build-debian
build=${MGTRAIN_BUILD_DIR:-$default_build}
exec "$build/bin/mgtrain" launch --nproc 2 configs/fashion_mnist_cnn.yaml "$@"
