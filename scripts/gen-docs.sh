#!/usr/bin/env bash
# Regenerates the docs that come from code: docs/config.md from the config schema.
# Usage: scripts/gen-docs.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake --build "$build" --target mgtrain >/dev/null
"$build/bin/mgtrain" config docs > docs/config.md
echo "wrote docs/config.md"
