#!/bin/sh
# The rendezvous server with thousands of simulated agents in one process (tests/bench/rendezvous_scale_bench.cpp):
# join, heartbeats only (the server thread's CPU), one worker failure broadcast to every node, teardown. Goal
# (docs/PERFORMANCE.md): 10,000 agents joined and released in <= 2 s, heartbeats <= 5 % of one core.
# Runs twice in one go, like with like: without authentication, then with every frame authenticated (a token).
# Needs a configured build (default build/, torch-free is enough):
#   scripts/bench/rendezvous_scale.sh [agents=10000] [heartbeat interval s=5] [steady window s=10] [build dir]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${4:-$root/build}
cmake --build "$build" --target rendezvous_scale_bench >/dev/null
"$build/tests/rendezvous_scale_bench" "${1:-10000}" "${2:-5}" "${3:-10}"
echo
MGTRAIN_RDZV_TOKEN=rendezvous-scale-bench-token-0123456789 \
  "$build/tests/rendezvous_scale_bench" "${1:-10000}" "${2:-5}" "${3:-10}"
