#!/usr/bin/env bash
# Checkpoint benchmark (not a test), on a model with ~160 MB of state (configs/bench/checkpoint-160mb.yaml,
# world 2, a save every 5 steps), in one run:
#   1. the training stall per checkpoint (rank 0 waits for the snapshot and the RNG gather; the write runs in
#      the background) against the time to copy the same state to CPU memory with a plain clone(), measured
#      right after each save in the same process (MGTRAIN_BENCH_CHECKPOINT_COPY=1); goal: stall <= 2x copy;
#   2. the trainer's checkpoint write throughput against `dd bs=8M conv=fsync` of the same size to the same
#      directory, alternating ROUNDS times; goal: >= 80% of dd. The trainer's rate is the checkpoint file's
#      (temporary file to directory fsync after the rename), timed like dd; the `latest` update and pruning
#      that follow are printed separately by the trainer. Reported for the last save of each run (written
#      after training ended, like dd with the machine to itself) and for the saves written while both cores train.
# Reports medians and ratios. Usage: scripts/bench/checkpoint.sh   (ROUNDS=3, DIR=a temp dir under $TMPDIR)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-3}
mgtrain=${MGTRAIN:-build/bin/mgtrain}
work=${DIR:-$(mktemp -d)}
mkdir -p "$work"
trap 'rm -rf "$work"/runs "$work"/dd.bin' EXIT
export OMP_NUM_THREADS=1

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

stalls=() copies=() clones=() writes=() busy_writes=() dds=()
for round in $(seq 1 "$rounds"); do
  echo "round $round/$rounds" >&2
  rm -rf "$work/runs"
  out=$(MGTRAIN_BENCH_CHECKPOINT_COPY=1 "$mgtrain" launch --nproc 2 --log-dir "$work/runs" configs/bench/checkpoint-160mb.yaml 2>&1)
  # The first save allocates the snapshot buffer (page faults): the steady state is the later ones.
  while read -r stall copy clone; do stalls+=("$stall"); copies+=("$copy"); clones+=("$clone"); done < <(
    grep -o 'checkpoint stall [0-9.]* ms, snapshot copy [0-9.]* ms, plain clone [0-9.]* ms' <<<"$out" | tail -n +2 |
      awk '{print $3, $7, $11}')
  rates=$(grep -o 'written in [0-9.]* s ([0-9]* MB/s)' <<<"$out" | sed -E 's/.*\(([0-9]+) MB\/s\)/\1/')
  # Saves during training share the 2 cores with it; the last one (step 30) is written after training ended.
  while read -r rate; do busy_writes+=("$rate"); done < <(sed '1d;$d' <<<"$rates")
  writes+=("$(tail -1 <<<"$rates")")
  mb=$(grep -o 'safetensors, [0-9.]* MB' <<<"$out" | head -1 | awk '{print $2}')
  count=$(awk -v mb="$mb" 'BEGIN {printf "%d", mb / 8.388608 + 0.5}')
  dd_rate=$(dd if=/dev/zero of="$work/dd.bin" bs=8M count="$count" conv=fsync 2>&1 | tail -1 |
    awk '{for (i = 1; i <= NF; ++i) if ($i ~ /^[0-9.]+$/ && $(i+1) ~ /B\/s$/) {v = $i; u = $(i+1)}}
         END {if (u == "GB/s") v *= 1000; if (u == "kB/s") v /= 1000; print v}')
  dds+=("$dd_rate")
  rm -f "$work/dd.bin"
done

stall=$(printf '%s\n' "${stalls[@]}" | median)
copy=$(printf '%s\n' "${copies[@]}" | median)
clone=$(printf '%s\n' "${clones[@]}" | median)
write=$(printf '%s\n' "${writes[@]}" | median)
busy_write=$(printf '%s\n' "${busy_writes[@]}" | median)
dd=$(printf '%s\n' "${dds[@]}" | median)
echo "state per checkpoint: ${mb} MB; saves measured: ${#stalls[@]} (first save of each run left out)"
echo "training stall per checkpoint: median ${stall} ms; snapshot copy ${copy} ms; plain clone ${clone} ms"
awk -v s="$stall" -v c="$clone" 'BEGIN {printf "stall / plain clone: %.2f (goal <= 2)\n", s / c}'
echo "write throughput: trainer median ${write} MB/s (last save, training over), ${busy_write} MB/s (while training on"
echo "  every core); dd conv=fsync median ${dd} MB/s"
awk -v w="$write" -v b="$busy_write" -v d="$dd" 'BEGIN {printf "trainer / dd: %.2f training over, %.2f while training (goal >= 0.80)\n", w / d, b / d}'
