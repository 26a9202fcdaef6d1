#!/usr/bin/env bash
# clang-tidy (.clang-tidy's checks, Debian's clang-tidy 14) over the torch-free libraries and the launcher's and
# plotter's sources, with the compile commands of a configured build folder. Any finding fails (exit 1), named
# by file and line. Run by ctest (`check_tidy`, label lint) in the main stage. A source is checked again only when
# its translation unit changed since its last clean check (scripts/check/tidy_run.py keeps those results under
# ~/.cache/mgtrain/tidy; MGTRAIN_TIDY_CACHE moves it, an empty folder checks everything).
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
# clang-tidy on each source whose translation unit changed since its last clean check (tidy_run.py: the cache).
python3 scripts/check/tidy_run.py "$build" "$work" "${files[@]}"
