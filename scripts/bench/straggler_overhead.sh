#!/usr/bin/env bash
# Straggler detection's cost (not a test): a synthetic step loop (Python, ~10 ms of CPU work per step, the step
# count written to its progress file after every step, as a training loop with a progress hook would) under
# `mgtrain launch --heartbeat-timeout 600`, with detection off (launch.straggler_detection=false), on with the
# default 30 s window (files read every 1 s) and on with the shortest window, 1 s (files read every 0.1 s: the
# most the launcher ever reads). The three alternate, $RUNS rounds; each run's figure is the workers' mean
# wall time per step, measured inside the workers (launcher start-up and exit left out). Prints the medians and
# the ratios to "off"; docs/PERFORMANCE.md records the result with this command. The built-in trainer is not
# used so that the benchmark needs no LibTorch build.
# Usage: scripts/bench/straggler_overhead.sh          (needs build/bin/mgtrain and python3)
#   RUNS=9 NPROC=4 STEPS=300 WORK=200000 MGTRAIN_BUILD_DIR=build scripts/bench/straggler_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=${RUNS:-9}
nproc=${NPROC:-4}
steps=${STEPS:-300}
work=${WORK:-200000}
build=${MGTRAIN_BUILD_DIR:-build}
mgtrain=${MGTRAIN:-$build/bin/mgtrain}
for tool in "$mgtrain" python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "straggler_overhead.sh: $tool not found (build mgtrain with scripts/build.sh)" >&2
    exit 2
  fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/worker.py" <<'EOF'
import os, sys, time
steps, work = int(sys.argv[1]), int(sys.argv[2])
path = os.environ["MGTRAIN_HEARTBEAT_FILE"]
start = time.perf_counter()
for step in range(1, steps + 1):
    x = 0
    for i in range(work):
        x += i * i
    with open(path + ".tmp", "w") as f:
        f.write("%d\n" % step)
    os.replace(path + ".tmp", path)
with open(os.path.join(os.environ["BENCH_OUT"], "rank" + os.environ["RANK"]), "w") as f:
    f.write("%.6f\n" % ((time.perf_counter() - start) / steps * 1000))
EOF

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

run_ms() {  # one launch with the given overrides; prints the workers' mean ms per step
  local out="$tmp/out.$RANDOM"
  mkdir -p "$out"
  BENCH_OUT=$out "$mgtrain" launch --nproc "$nproc" --heartbeat-timeout 600 --log-dir "$tmp/runs" "$@" \
    -- python3 "$tmp/worker.py" "$steps" "$work" >/dev/null 2>&1
  cat "$out"/rank* | awk '{ s += $1 } END { printf "%.4f\n", s / NR }'
  rm -rf "$out"
}

modes=(off on fast)
declare -A overrides=(
  [off]="launch.straggler_detection=false"
  [on]="launch.straggler_detection=true"
  [fast]="launch.straggler_window=1"
)
declare -A results
echo "straggler_overhead: $runs rounds of off/on/fast, $nproc ranks, $steps steps of ~$work loop iterations each"
for ((round = 1; round <= runs; round++)); do
  for mode in "${modes[@]}"; do
    ms=$(run_ms ${overrides[$mode]})
    results[$mode]+="$ms "
    echo "  round $round $mode: $ms ms/step"
  done
done
off=$(tr ' ' '\n' <<<"${results[off]}" | grep . | median)
printf '%-44s %10s %8s\n' "mode" "ms/step" "ratio"
for mode in "${modes[@]}"; do
  med=$(tr ' ' '\n' <<<"${results[$mode]}" | grep . | median)
  label="$mode (${overrides[$mode]})"
  printf '%-44s %10.3f %8.4f\n' "$label" "$med" "$(awk -v a="$med" -v b="$off" 'BEGIN { print a / b }')"
done
