#!/usr/bin/env bash
# The whole test suite from nothing: install what is missing (test tools included), build everything in
# Release, run every test with ctest. Re-runs are incremental. Exit code 0 only when every test passed.
# Usage: scripts/test.sh [extra ctest arguments, e.g. -R launch]
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/install-deps.sh --test
scripts/build.sh
build=${MGTRAIN_BUILD_DIR:-build}
cd "$build"
status=0
ctest -j "$(nproc)" --output-on-failure --timeout 300 "$@" || status=$?
echo "scripts/test.sh: finished in $(( $(date +%s) - start )) s"
exit $status
