#!/usr/bin/env bash
# Fails when a C++ file in lib/ apps/ tests/ is not formatted as .clang-format says (clang-format 14, Debian's).
# Run by ctest (`format_check`, label lint). To fix: scripts/check/format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v clang-format >/dev/null || { echo "format.sh: clang-format not found (apt-get install clang-format)" >&2; exit 2; }
mode=(--dry-run --Werror)
[[ ${1:-} == --fix ]] && mode=(-i)
git ls-files -z -- 'lib/*.cpp' 'lib/*.hpp' 'apps/*.cpp' 'apps/*.hpp' 'tests/*.cpp' 'tests/*.hpp' |
  xargs -0 -r clang-format --style=file "${mode[@]}"
echo "format.sh: every C++ file is formatted"
