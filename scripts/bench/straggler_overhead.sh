#!/usr/bin/env bash
# Straggler detection's cost (not a test): a synthetic step loop (Python, ~10 ms of CPU work per step, the step
# count written to its progress file after every step, as a training loop with a progress hook would) under
# `mgtrain launch --heartbeat-timeout 600`, with detection off (launch.straggler_detection=false), on with the
# default 30 s window (files read every 1 s) and on with the shortest window, 1 s (files read every 0.1 s: the
# most the launcher ever reads). The three alternate, $RUNS rounds; each run's figure is the workers' mean
# wall time per step, measured inside the workers (launcher start-up and exit left out), and the launcher's own
# CPU time (GNU time's user+system of the launch, less the workers' CPU time as they report it). Prints the
# medians, the ratios to "off", and the launcher's extra CPU as a share of the workers' CPU time;
# docs/PERFORMANCE.md records the result with this command. The built-in trainer is not used so that the
# benchmark needs no LibTorch build.
# Usage: scripts/bench/straggler_overhead.sh          (needs build/bin/mgtrain, python3 and /usr/bin/time)
#   RUNS=9 NPROC=4 STEPS=300 WORK=200000 MGTRAIN_BUILD_DIR=build scripts/bench/straggler_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=${RUNS:-9}
nproc=${NPROC:-4}
steps=${STEPS:-300}
work=${WORK:-200000}
build=${MGTRAIN_BUILD_DIR:-build}
mgtrain=${MGTRAIN:-$build/bin/mgtrain}
for tool in "$mgtrain" python3 /usr/bin/time; do
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
    f.write("%.6f %.6f\n" % ((time.perf_counter() - start) / steps * 1000, time.process_time()))
EOF

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

run_once() {  # one launch with the given overrides; prints "ms/step launcher-cpu-s workers-cpu-s"
  local out="$tmp/out.$RANDOM"
  mkdir -p "$out"
  BENCH_OUT=$out /usr/bin/time -f '%U %S' -o "$out/time" "$mgtrain" launch --nproc "$nproc" --heartbeat-timeout 600 \
    --log-dir "$tmp/runs" "$@" -- python3 "$tmp/worker.py" "$steps" "$work" >/dev/null 2>&1
  local total
  total=$(tail -n 1 "$out/time" | awk '{ print $1 + $2 }')
  cat "$out"/rank* | awk -v total="$total" '{ ms += $1; cpu += $2 } END { printf "%.4f %.4f %.4f\n", ms / NR, total - cpu, cpu }'
  rm -rf "$out"
}

modes=(off on fast)
declare -A overrides=(
  [off]="launch.straggler_detection=false"
  [on]="launch.straggler_detection=true"
  [fast]="launch.straggler_window=1"
)
declare -A ms_results cpu_results worker_cpu_results
echo "straggler_overhead: $runs rounds of off/on/fast, $nproc ranks, $steps steps of ~$work loop iterations each"
for ((round = 1; round <= runs; round++)); do
  for mode in "${modes[@]}"; do
    read -r ms cpu worker_cpu < <(run_once ${overrides[$mode]})
    ms_results[$mode]+="$ms "
    cpu_results[$mode]+="$cpu "
    worker_cpu_results[$mode]+="$worker_cpu "
    echo "  round $round $mode: $ms ms/step, launcher CPU $cpu s, workers' CPU $worker_cpu s"
  done
done
med() { tr ' ' '\n' <<<"$1" | grep . | median; }
off_ms=$(med "${ms_results[off]}")
off_cpu=$(med "${cpu_results[off]}")
printf '%-40s %9s %8s %14s %20s\n' "mode" "ms/step" "ratio" "launcher CPU s" "extra / workers' CPU"
for mode in "${modes[@]}"; do
  ms=$(med "${ms_results[$mode]}")
  cpu=$(med "${cpu_results[$mode]}")
  worker_cpu=$(med "${worker_cpu_results[$mode]}")
  printf '%-40s %9.3f %8.4f %14.3f %19.3f%%\n' "$mode (${overrides[$mode]})" "$ms" \
    "$(awk -v a="$ms" -v b="$off_ms" 'BEGIN { print a / b }')" "$cpu" \
    "$(awk -v a="$cpu" -v b="$off_cpu" -v w="$worker_cpu" 'BEGIN { print 100 * (a - b) / w }')"
done
