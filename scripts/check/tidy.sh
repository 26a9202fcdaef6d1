#!/usr/bin/env bash
# clang-tidy (.clang-tidy's checks, Debian's clang-tidy 14) over the torch-free libraries and the launcher's and
# plotter's sources, with the compile commands of a configured build folder. Any finding fails (exit 1), named
# by file and line. Run by ctest (`clang_tidy`, label lint) in the main stage.
# Usage: scripts/check/tidy.sh BUILD_DIR   (JOBS=N: parallel clang-tidy processes, default nproc)
set -euo pipefail
build=${1:?usage: scripts/check/tidy.sh BUILD_DIR}
build=$(cd "$build" && pwd)
cd "$(dirname "$0")/../.."
command -v clang-tidy >/dev/null || { echo "tidy.sh: clang-tidy not found (apt-get install clang-tidy)" >&2; exit 2; }
[[ -f $build/compile_commands.json ]] || { echo "tidy.sh: $build/compile_commands.json not found (configure first)" >&2; exit 2; }
# The torch-free sources; status_http_httplib.cpp is the cpp-httplib module (third-party heavy, dlopen'ed).
mapfile -t files < <(git ls-files -- 'lib/*.cpp' 'apps/mgtrain/*.cpp' 'apps/mgtrain-plot/*.cpp' |
  grep -v -e '^lib/train/' -e 'status_http_httplib\.cpp$')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$work/findings
# The build's compile commands, with each unity-build source (lib/cli) given its batch's command.
python3 - "$build/compile_commands.json" "$work/compile_commands.json" <<'PY'
import json, re, sys
entries = json.load(open(sys.argv[1]))
for entry in list(entries):
    if "/Unity/unity_" in entry["file"]:
        for source in re.findall(r'#include "([^"]+)"', open(entry["file"]).read()):
            entries.append(dict(entry, file=source, command=entry["command"].replace(entry["file"], source)))
json.dump(entries, open(sys.argv[2], "w"))
PY
# The build may pass GCC-only warning flags, which clang does not know.
printf '%s\0' "${files[@]}" |
  xargs -0 -r -P "${JOBS:-$(nproc)}" -n 4 clang-tidy -p "$work" --quiet --extra-arg=-Wno-unknown-warning-option \
    >"$out" 2>&1 || true
if grep -E '(warning|error): ' "$out" | grep -v 'warnings generated' >/dev/null; then
  grep -E -A3 '(warning|error): ' "$out" | grep -v 'warnings generated'
  echo "tidy.sh: clang-tidy found the above in ${#files[@]} files" >&2
  exit 1
fi
echo "tidy.sh: ${#files[@]} files, no findings"
