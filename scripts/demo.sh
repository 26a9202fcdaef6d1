#!/usr/bin/env bash
# The main job from nothing: install what is missing, build in Release, and train on the default config
# with two worker processes. Re-runs are incremental.
# Usage: scripts/demo.sh [extra mgtrain launch arguments, e.g. train.epochs=1]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh mgtrain mgtrain-worker
build=${MGTRAIN_BUILD_DIR:-build}
exec "$build/bin/mgtrain" launch --nproc 2 configs/fashion_mnist_cnn.yaml "$@"
