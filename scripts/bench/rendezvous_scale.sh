#!/bin/sh
# The rendezvous server with thousands of simulated agents in one process (tests/bench/rendezvous_scale_bench.cpp):
# join, heartbeats only (the server thread's CPU), one worker failure broadcast to every node, teardown. Goal
# (docs/PERFORMANCE.md): 10,000 agents joined and released in <= 2 s, heartbeats <= 5 % of one core.
# Runs twice in one go, like with like: without authentication, then with every frame authenticated (a token).
# STATUS_RANKS=N: then twice more, each agent also sending the job-wide status API's node-status report of N ranks
# every 2 s during the heartbeat-only window (docs/monitoring.md#several-nodes): the same runs with and without.
# Needs a configured build (default build/, torch-free is enough):
#   [STATUS_RANKS=8] scripts/bench/rendezvous_scale.sh [agents=10000] [heartbeat interval s=5] [steady window s=10]
#                    [build dir]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${4:-$root/build}
cmake --build "$build" --target rendezvous_scale_bench >/dev/null
token=rendezvous-scale-bench-token-0123456789
for ranks in 0 ${STATUS_RANKS:-}; do
  [ "$ranks" = 0 ] || echo
  MGTRAIN_BENCH_STATUS_RANKS=$ranks "$build/tests/rendezvous_scale_bench" "${1:-10000}" "${2:-5}" "${3:-10}"
  echo
  MGTRAIN_BENCH_STATUS_RANKS=$ranks MGTRAIN_RDZV_TOKEN=$token \
    "$build/tests/rendezvous_scale_bench" "${1:-10000}" "${2:-5}" "${3:-10}"
done
