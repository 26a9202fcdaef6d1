#!/bin/sh
# Times reading a large metrics.jsonl (default 200000 train rows) with MetricsLog's scanner and with nlohmann::json
# per line. Needs a configured build (default build/, torch-free is enough): scripts/bench/metrics_jsonl_bench.sh [rows] [build dir]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${2:-$root/build}
cmake --build "$build" --target mgtrain_observe >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
c++ -std=c++17 -O2 -DNDEBUG -I"$build/include_roots/mgtrain_observe" -I"$build/include_roots/mgtrain_util" \
  "$root/scripts/bench/metrics_jsonl_bench.cpp" "$build/lib/observe/libmgtrain_observe.a" "$build/lib/util/libmgtrain_util.a" \
  -lfmt -o "$out/bench"
"$out/bench" "${1:-200000}"
