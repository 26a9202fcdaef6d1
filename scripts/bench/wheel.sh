#!/usr/bin/env bash
# The wheels' benchmark (not a test; docs/PERFORMANCE.md, "The wheels"): their sizes, and the launcher installed from
# its wheel against the launcher of the build it came from, side by side in one scripts/bench/launcher.sh run (the
# wheel's bin/mgtrain is the "mgtrain" column, build/bin/mgtrain the "baseline" one, torch 2.x's torchrun beside
# them). Builds the wheels from the build (scripts/wheel.sh --no-build) and installs the launcher's into a temporary
# venv (no torch: the launcher needs none).
# Usage: scripts/bench/wheel.sh          RUNS, RSS_RUNS, LATENCY_RUNS and MGTRAIN_BUILD_DIR as for launcher.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${MGTRAIN_BUILD_DIR:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
scripts/wheel.sh --no-build --build-dir "$build" --out "$tmp/dist" >"$tmp/wheel.log" 2>&1 ||
  { cat "$tmp/wheel.log" >&2; exit 1; }
/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --disable-pip-version-check --no-cache-dir --no-index \
  --find-links "$tmp/dist" mgtrain >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log" >&2; exit 1; }
echo "wheel sizes (compressed, and unpacked):"
for wheel in "$tmp"/dist/*.whl; do
  unpacked=$(unzip -l "$wheel" | tail -n 1 | awk '{ print $1 }')
  awk -v name="$(basename "$wheel")" -v packed="$(stat -c %s "$wheel")" -v unpacked="$unpacked" \
    'BEGIN { printf "  %-60s %6.1f MB  %6.1f MB\n", name, packed / 1e6, unpacked / 1e6 }'
done
echo
torchrun=$(scripts/torch2-env.sh)/bin/torchrun
MGTRAIN="$tmp/venv/bin/mgtrain" MGTRAIN_BASELINE="$build/bin/mgtrain" TORCHRUN=$torchrun scripts/bench/launcher.sh
