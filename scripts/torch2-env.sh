#!/usr/bin/env bash
# Creates (once) the virtual environment that holds the pip torch of the main build flavour (scripts/build-torch2.sh)
# and prints its path. The torch version is pinned in scripts/torch2-version (the one place; others read it).
#   scripts/torch2-env.sh                      -> prints e.g. $HOME/.cache/mgtrain/torch-2.15.0
#   scripts/torch2-env.sh VERSION_FILE         -> the venv of the version pinned in that file instead (the GPU bundle's
#                                                 scripts/device/torch-version: the device's own torch)
# The venv lives outside the clone: ${MGTRAIN_TORCH2_VENV:-$HOME/.cache/mgtrain/torch-<version>}, made with Debian's
# /usr/bin/python3 -m venv (python3-venv). PyPI's torch wheel for Linux x86_64 is the CUDA 13 build and brings its
# CUDA runtime, cuDNN and NCCL as nvidia-* wheels: about 3 GB, which took 108 s to download and install on the
# development VM. A venv whose torch already has the pinned version is reused at once (no network).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version_file=${1:-$here/torch2-version}
[[ -r "$version_file" ]] || { echo "torch2-env.sh: cannot read the version file $version_file" >&2; exit 2; }
version=$(tr -d '[:space:]' < "$version_file")
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  { echo "torch2-env.sh: $version_file holds '$version', not a torch version like 2.11.0" >&2; exit 2; }
venv=${MGTRAIN_TORCH2_VENV:-$HOME/.cache/mgtrain/torch-$version}
python=/usr/bin/python3

installed_version() {
  [[ -x "$venv/bin/python" ]] || return 1
  "$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null
}

if [[ "$(installed_version || true)" == "$version" ]]; then
  echo "$venv"
  exit 0
fi

if ! "$python" -c 'import ensurepip' 2>/dev/null; then
  echo "torch2-env.sh: $python cannot make a venv (no ensurepip): apt-get install python3-venv" >&2
  exit 2
fi
if [[ ! -x "$venv/bin/python" ]]; then
  echo "torch2-env.sh: creating $venv" >&2
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
fi
echo "torch2-env.sh: installing torch==$version and numpy from PyPI into $venv (about 3 GB; a first download takes" \
     "about 2 minutes on a fast link)" >&2
start=$(date +%s)
log=$(mktemp)
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input "torch==$version" numpy >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  if grep -qiE "connection|resolve|network|timed out|temporary failure|unreachable|proxy|ssl" "$log"; then
    echo "torch2-env.sh: pip could not reach PyPI (see above); torch==$version needs network access to PyPI once" >&2
  else
    echo "torch2-env.sh: pip install torch==$version failed (see above)" >&2
  fi
  rm -f "$log"
  exit 1
fi
rm -f "$log"
got=$(installed_version || true)
if [[ "$got" != "$version" ]]; then
  echo "torch2-env.sh: after the install $venv has torch '${got:-none}', not $version" >&2
  exit 1
fi
echo "torch2-env.sh: torch $version installed in $(( $(date +%s) - start )) s" >&2
echo "$venv"
