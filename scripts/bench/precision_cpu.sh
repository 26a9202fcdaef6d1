#!/usr/bin/env bash
# bf16 vs fp32 step time on the CPU (docs/gpu.md): mgtrain-worker alone (world 1) on the MLP config
# (configs/fashion_mnist_mlp.yaml: MLP 784-256-128-100-10, batch 64, Fashion-MNIST) and on the compute-bound
# configs/bench/mlp-1024.yaml, alternating fp32 and bf16 ROUNDS times; prints the median step times and bf16/fp32.
# Usage: scripts/bench/precision_cpu.sh    (ROUNDS=3, STEPS=300, MGTRAIN_WORKER=build/bin/mgtrain-worker, OMP_NUM_THREADS=1)
set -euo pipefail
cd "$(dirname "$0")/../.."
worker=${MGTRAIN_WORKER:-build/bin/mgtrain-worker}
rounds=${ROUNDS:-3}
steps=${STEPS:-300}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[[ -x "$worker" ]] || { echo "precision_cpu.sh: $worker not found (build it, or set MGTRAIN_WORKER)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

field() { grep -o '{"summary".*' | head -1 | sed -E "s/.*\"$1\": ?([0-9.e+-]+).*/\1/"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
run() {  # run CONFIG PRECISION -> step_time_ms
  "$worker" "$1" "train.precision=$2" "train.max_steps=$steps" train.eval_at_epoch_end=false checkpoint.dir= \
    log.every_steps=100000 "launch.log_dir=$work" | field step_time_ms
}

flags=$(grep -o -w 'amx_bf16\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' '); echo "cpu bf16 support: ${flags:-none (emulated)}"
printf '%-28s %12s %12s %10s\n' config "fp32 ms" "bf16 ms" "bf16/fp32"
for config in configs/fashion_mnist_mlp.yaml configs/bench/mlp-1024.yaml; do
  fp32=() bf16=()
  for _ in $(seq 1 "$rounds"); do
    fp32+=("$(run "$config" fp32)")
    bf16+=("$(run "$config" bf16)")
  done
  f=$(printf '%s\n' "${fp32[@]}" | median)
  b=$(printf '%s\n' "${bf16[@]}" | median)
  printf '%-28s %12.3f %12.3f %10.2f\n' "$config" "$f" "$b" "$(echo "$b / $f" | bc -l)"
done
echo "(OMP_NUM_THREADS=$OMP_NUM_THREADS, $steps steps, median of $rounds; $(getconf _NPROCESSORS_ONLN) CPUs online, load average $(cut -d" " -f1 /proc/loadavg) at the end)"
