#!/usr/bin/env bash
# What copying snapshots to the buddy node costs (not a test; docs/checkpoints.md#replicas-on-a-buddy-node): the
# built-in trainer on 2 "nodes" (network namespaces A and B: scripts/bench/netns_nodes.sh), one rank each, Gloo between
# them (OMP_NUM_THREADS=1), $MODEL's bench config on synthetic data, no disk checkpoints. Three settings, alternating,
# $ROUNDS rounds: snapshots off (checkpoint.snapshot_every=0), snapshots without replicas
# (launch.snapshot_replicas=false), and snapshots with replicas (the default). Per run: rank 0's training throughput
# (its summary's samples/s) and, with replicas, what each node's launcher sent its buddy (its closing line: snapshots,
# MB, skipped). Prints the median throughput per setting and its ratio to "off" and to "without replicas" (the cost of
# the replication itself: the launchers' copy and the network next to the workers' Gloo traffic), the snapshot's size,
# the replication's bytes per second per node (MB sent / the run's training seconds), and the snapshots skipped.
# Usage: scripts/bench/replication.sh      (root: network namespaces; build/bin/mgtrain and mgtrain-worker)
#   ROUNDS=5 STEPS=600 MODEL=mlp-1024 EVERY=<the config default> SUBNET=10.82.0 PORT=29700 MGTRAIN=build/bin/mgtrain
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.."
name=replication.sh
die() { echo "$name: $*" >&2; exit 2; }
rounds=${ROUNDS:-5}
steps=${STEPS:-600}
model=${MODEL:-mlp-1024}
subnet=${SUBNET:-10.82.0}
port=${PORT:-29700}
mgtrain=${MGTRAIN:-build/bin/mgtrain}
mgtrain=$(cd "$(dirname "$mgtrain")" 2>/dev/null && pwd)/$(basename "$mgtrain")
[[ -x $mgtrain ]] || die "MGTRAIN: no $mgtrain (build with scripts/build.sh)"
[[ -f configs/bench/$model.yaml ]] || die "MODEL=$model: no configs/bench/$model.yaml"
every=${EVERY:-$("$mgtrain" config show configs/bench/mlp-64.yaml 2>/dev/null | awk '$1 == "snapshot_every:" {print $2}')}
for knob in ROUNDS=$rounds STEPS=$steps EVERY=$every PORT=$port; do
  [[ ${knob#*=} =~ ^[0-9]+$ && ${knob#*=} -gt 0 ]] || die "$knob: expected a positive integer"
done
work=$(mktemp -d)
source scripts/bench/netns_nodes.sh
trap 'remove_nodes; rm -rf "$work"' EXIT
make_nodes "rp$(($$ % 100000))"
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# run SETTING ROUND: one job on A and B; appends "setting rate mb_sent skipped wall" to $work/results
run() {
  local setting=$1 round=$2 run_port=$((port + $2)) i pids=() extra=()
  case $setting in
    off) extra=(checkpoint.snapshot_every=0) ;;
    snapshots) extra=("checkpoint.snapshot_every=$every" launch.snapshot_replicas=false) ;;
    replicas) extra=("checkpoint.snapshot_every=$every") ;;
  esac
  for i in 0 1; do
    "$ip" netns exec "${hosts[i]}" env OMP_NUM_THREADS=1 MGTRAIN_SHM_ALLREDUCE=0 "$mgtrain" launch --nnodes 2 \
      --node-rank "$i" --master-addr "$subnet.1" --master-port "$run_port" --nproc 1 --run-id "$setting-$round" \
      --log-dir "$work/runs" "configs/bench/$model.yaml" train.max_steps="$steps" data.synthetic_samples=200000 \
      checkpoint.every_steps=0 checkpoint.every_epochs=0 "${extra[@]}" >"$work/$setting-$round-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1; do
    wait "${pids[i]}" || { cat "$work/$setting-$round-$i.log" >&2; die "the $setting run (round $round) failed on node $i"; }
  done
  local rate wall mb skipped
  rate=$(grep -o '"samples_per_s":[0-9.]*' "$work/$setting-$round-0.log" | cut -d: -f2)
  wall=$(grep -o '"wall_s":[0-9.]*' "$work/$setting-$round-0.log" | cut -d: -f2)
  mb=$(cat "$work/$setting-$round-"{0,1}.log | { grep -o 'snapshot replication: sent [0-9]* snapshots* ([0-9.]* MB; [0-9]* skipped' || true; } |
    awk '{mb += substr($6, 2); skipped += $8} END {printf "%.1f %d", mb / 2, skipped / 2}')
  echo "$setting $rate ${mb:-0 0} $wall" >>"$work/results"
  rm -rf "$work/runs"
}

echo "$name: $rounds rounds of $steps steps of $model, 2 nodes x 1 rank (network namespaces), snapshot_every $every"
for round in $(seq 1 "$rounds"); do
  for setting in off snapshots replicas; do run "$setting" "$round"; done
done
snap=$(grep -o 'snapshot in memory at step [0-9]*: [0-9.]* MB' "$work"/replicas-1-0.log | head -1 | awk '{print $7}')
off=$(awk '$1 == "off" {print $2}' "$work/results" | median)
without=$(awk '$1 == "snapshots" {print $2}' "$work/results" | median)
with=$(awk '$1 == "replicas" {print $2}' "$work/results" | median)
mb=$(awk '$1 == "replicas" {print $3}' "$work/results" | median)
skipped=$(awk '$1 == "replicas" {print $4}' "$work/results" | median)
wall=$(awk '$1 == "replicas" {print $5}' "$work/results" | median)
awk -v off="$off" -v without="$without" -v with="$with" -v mb="$mb" -v wall="$wall" -v snap="$snap" \
  -v skipped="$skipped" -v every="$every" -v steps="$steps" 'BEGIN {
  printf "snapshot %s MB every %d steps\n", snap, every
  printf "  off                  %8.0f samples/s (median)\n", off
  printf "  snapshots            %8.0f samples/s, ratio to off %.3f\n", without, without / off
  printf "  snapshots + replicas %8.0f samples/s, ratio to off %.3f, to snapshots alone %.3f\n", with, with / off, with / without
  printf "  replication: %.1f MB sent per node in %.1f s of training = %.2f MB/s per node; %d of %d snapshots skipped (medians)\n",
    mb, wall, mb / wall, skipped, steps / every }'
