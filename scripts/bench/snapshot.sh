#!/usr/bin/env bash
# What snapshots in memory cost (not a test; docs/checkpoints.md#snapshots-in-memory): the built-in trainer at world 2
# (OMP_NUM_THREADS=1) on configs/bench/mlp-1024.yaml and configs/bench/cnn.yaml (synthetic data, no disk
# checkpoints), with checkpoint.snapshot_every 0 (off), the default and 10, alternating, $ROUNDS rounds. Per run: the
# trainer's training throughput (samples/s of its summary, after warm-up: every step's wall time, snapshot included)
# and the time of each snapshot after the first three (MGTRAIN_BENCH_SNAPSHOT=1: rank 0 prints every one; the first
# ones fault their slots' pages in). Prints, per model: the snapshot's size, the memory the launcher's stores hold
# per node (2 slots x size x ranks), the median snapshot time, the median throughput per setting and its ratio to
# "off" (the overhead: short runs on a small machine spread by a few per cent), the snapshot's own share of the step
# time (its median time / (snapshot_every x the median step time with snapshots off)), and the steps a failure loses
# at most (snapshot_every). Then, per model, the cost within one run (separate runs spread by a few per cent): one more
# run with the default and a metrics row every step, whose step times (after the first 100 steps) give the median of
# the snapshot steps, of the step after, and of the rest, and what the two cost as a share of all steps.
# Usage: scripts/bench/snapshot.sh    (ROUNDS=5 STEPS=600 MODELS="mlp-1024 cnn" DEFAULT_EVERY=<the config default>
#                                      MGTRAIN=build/bin/mgtrain)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-5}
steps=${STEPS:-600}
models=${MODELS:-mlp-1024 cnn}
mgtrain=${MGTRAIN:-build/bin/mgtrain}
[[ -x $mgtrain ]] || { echo "snapshot.sh: no $mgtrain (build with scripts/build.sh)" >&2; exit 2; }
default_every=${DEFAULT_EVERY:-$("$mgtrain" config show configs/bench/mlp-64.yaml 2>/dev/null |
  awk '$1 == "snapshot_every:" {print $2}')}
[[ $default_every =~ ^[0-9]+$ ]] || { echo "snapshot.sh: cannot read the default checkpoint.snapshot_every" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

settings=(0 "$default_every" 10)
echo "snapshot.sh: $rounds rounds of $steps steps, world 2, snapshot_every ${settings[*]} (default $default_every)"
for model in $models; do
  [[ -f configs/bench/$model.yaml ]] || { echo "snapshot.sh: MODELS: no configs/bench/$model.yaml" >&2; exit 2; }
  : >"$work/$model.rates" >"$work/$model.snaps"
  for round in $(seq 1 "$rounds"); do
    for every in "${settings[@]}"; do
      out=$(MGTRAIN_BENCH_SNAPSHOT=1 "$mgtrain" launch --nproc 2 --log-dir "$work/runs" "configs/bench/$model.yaml" \
        train.max_steps="$steps" data.synthetic_samples=200000 checkpoint.snapshot_every="$every" 2>&1) ||
        { echo "$out" >&2; echo "snapshot.sh: the run of $model with snapshot_every $every failed" >&2; exit 1; }
      rate=$(grep -o '"samples_per_s":[0-9.]*' <<<"$out" | cut -d: -f2)
      step_ms=$(grep -o '"step_time_ms":[0-9.]*' <<<"$out" | cut -d: -f2)
      echo "$every $rate $step_ms" >>"$work/$model.rates"
      grep -o 'snapshot in memory at step [0-9]*: [0-9.]* MB in [0-9.]* ms' <<<"$out" | tail -n +4 |
        awk -v e="$every" '{print e, $7, $10}' >>"$work/$model.snaps" || true
    done
    rm -rf "$work/runs"
  done
  off=$(awk '$1 == 0 {print $2}' "$work/$model.rates" | median)
  step_ms=$(awk '$1 == 0 {print $3}' "$work/$model.rates" | median)
  mb=$(awk -v e="$default_every" '$1 == e {print $2}' "$work/$model.snaps" | median)
  echo "== $model: snapshot $mb MB, the stores of a node hold $(awk -v m="$mb" 'BEGIN {printf "%.1f", 2 * m * 2}') MB (2 slots x 2 ranks)"
  for every in "${settings[@]}"; do
    rate=$(awk -v e="$every" '$1 == e {print $2}' "$work/$model.rates" | median)
    ms=$(awk -v e="$every" '$1 == e {print $3}' "$work/$model.snaps" | median)
    awk -v e="$every" -v r="$rate" -v o="$off" -v ms="$ms" -v step="$step_ms" 'BEGIN {
      if (e == 0) printf "   snapshot_every %3s: %8.0f samples/s (median), step %.2f ms (median)\n", "off", r, step;
      else printf "   snapshot_every %3d: %8.0f samples/s, ratio to off %.3f, snapshot %s ms = %.2f %% of %d steps, a failure loses <= %d steps\n",
        e, r, r / o, ms, ms / (e * step) * 100, e, e }'
  done
  # Within one run: the snapshot steps against the others (metrics.jsonl, a row every step).
  MGTRAIN_BENCH_SNAPSHOT=1 "$mgtrain" launch --nproc 2 --log-dir "$work/runs" --run-id within "configs/bench/$model.yaml" \
    train.max_steps="$steps" data.synthetic_samples=200000 checkpoint.snapshot_every="$default_every" \
    log.metrics_every_steps=1 >/dev/null 2>&1 ||
    { echo "snapshot.sh: the run of $model with a metrics row every step failed" >&2; exit 1; }
  python3 - "$work/runs/within/metrics.jsonl" "$default_every" <<'PY'
import json, statistics, sys
every = int(sys.argv[2])
times = {}
for line in open(sys.argv[1]):
    row = json.loads(line)
    if row.get("kind") == "train" and row["step"] > 100:
        times.setdefault(min(row["step"] % every, 2), []).append(row["step_time_ms"])
snap, after, rest = (statistics.median(times[k]) for k in (0, 1, 2))
share = ((snap - rest) + (after - rest)) / (every * rest) * 100
print("   within one run, snapshot_every %d: snapshot steps %.2f ms, the step after %.2f ms, the others %.2f ms (medians):"
      " %.2f %% of the step time" % (every, snap, after, rest, share))
PY
  rm -rf "$work/runs"
done
