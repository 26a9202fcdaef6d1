#!/usr/bin/env bash
# The torch-free libraries, the launcher and their unit tests built with AddressSanitizer and
# UndefinedBehaviorSanitizer (-DMGTRAIN_SANITIZE=ON, -O1 -g, warnings as errors) in their own build directory, then
# run: every test labelled `unit` (the target mgtrain_unit_tests builds their binaries), plus the launcher itself on
# one node and as two node agents on loopback. Any sanitizer report fails (ASan aborts; UBSan is not recoverable).
# The process and network-namespace suites (label integration) are left to scripts/test.sh. Re-runs are incremental. Exit code 0
# only when everything passed.
# Usage: scripts/test-sanitizers.sh [build dir, default build-asan]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/compiler-cache.sh
build=${1:-${MGTRAIN_ASAN_BUILD_DIR:-build-asan}}
start=$(date +%s)
generator=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DMGTRAIN_BUILD_WORKER=OFF -DMGTRAIN_SANITIZE=ON -DMGTRAIN_WERROR=ON "${compiler_cache_args[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target mgtrain mgtrain_unit_tests
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
(cd "$build" && mkdir -p Testing &&
  ctest -j "$(nproc)" --output-on-failure --no-tests=error --timeout 300 -L unit | tee Testing/sanitizers-stage.log) ||
  status=$?

# The launcher under the sanitizers: one node, then two node agents meeting on loopback.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mgtrain="$root/$build/bin/mgtrain"
if ! "$mgtrain" launch --nproc 2 --run-id asan --log-dir "$work/runs" -- /bin/true >"$work/single.log" 2>&1; then
  echo "test-sanitizers: single-node launch failed:"; cat "$work/single.log"; status=1
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
node=("$mgtrain" launch --nnodes 2 --master-addr 127.0.0.1 --master-port "$port" --nproc 1 --run-id asan2
      --log-dir "$work/runs" --join-timeout 60)
"${node[@]}" --node-rank 1 -- /bin/true >"$work/node1.log" 2>&1 &
node1=$!
node0_status=0
"${node[@]}" --node-rank 0 -- /bin/true >"$work/node0.log" 2>&1 || node0_status=$?
node1_status=0
wait "$node1" || node1_status=$?
if [ "$node0_status" != 0 ] || [ "$node1_status" != 0 ]; then
  echo "test-sanitizers: two-node loopback launch failed ($node0_status, $node1_status):"; cat "$work/node0.log" "$work/node1.log"
  status=1
fi
echo "scripts/test-sanitizers.sh: finished in $(( $(date +%s) - start )) s (exit $status)"
exit $status
