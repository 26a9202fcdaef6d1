#!/usr/bin/env bash
# Where a world-2 DDP step goes: mgtrain's LibTorch DDP and Python DDP (torchrun, gloo) on the same model, each quiet
# and beside a 2-CPU load (stress-ng --cpu 2), under Debian's linux-perf:
#   - perf stat over the whole job (launcher, workers, their threads): CPU time, context switches, CPU migrations,
#     per training step;
#   - perf record (cpu-clock samples with call graphs) over the whole job: the share of the samples per program part
#     (compute in the BLAS and ATen, the all-reduce, the kernel's scheduler and futexes, spinning, Python, ...) and
#     the top symbols.
# Usage: scripts/bench/ddp_profile.sh [MODEL]   (MODEL: mlp-1024 (default) or mlp-64; WORLD=1 for one rank; needs
#        build/bin/mgtrain, TORCHRUN=<venv>/bin/torchrun for Python DDP of torch 2.x; perf and stress-ng from Debian)
# Writes its reports under ${OUT:-/tmp/ddp-profile}; prints the summary table.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-mlp-1024}
case $model in
  mlp-1024) hidden=1024,1024 batch=64 steps=300 ;;
  mlp-64) hidden=64,64 batch=32 steps=1000 ;;
  *) echo "ddp_profile.sh: unknown model '$model' (mlp-1024 or mlp-64)" >&2; exit 2 ;;
esac
for tool in perf stress-ng; do
  command -v "$tool" >/dev/null || { echo "ddp_profile.sh: $tool is missing (apt-get install linux-perf stress-ng)" >&2; exit 2; }
done
mgtrain=${MGTRAIN:-build/bin/mgtrain}
torchrun=${TORCHRUN:-/usr/bin/torchrun}
out=${OUT:-/tmp/ddp-profile}
world=${WORLD:-2}
rm -rf "$out" && mkdir -p "$out"
export OMP_NUM_THREADS=1

run_mgtrain() { "$mgtrain" launch --nproc "$world" --log-dir "$out/runs" "configs/bench/$model.yaml" "train.max_steps=$steps"; }
run_python() {
  "$torchrun" --standalone --monitor-interval 0.1 --nproc_per_node "$world" scripts/bench/python_ddp_reference.py \
    --hidden "$hidden" --batch "$batch" --steps "$steps"
}

load_pid=""
stop_load() { if [[ -n $load_pid ]]; then kill "$load_pid" 2>/dev/null || true; wait "$load_pid" 2>/dev/null || true; load_pid=""; fi; }
trap stop_load EXIT

# Which part of the program a sample's symbol and library belong to.
classify='
  function part(dso, sym) {
    if (sym ~ /ShmReduceGroup|reduce_share|sum_slots|ShmAllreduce/) return "shm all-reduce";
    if (sym ~ /gloo|Gloo/ || dso ~ /gloo/) return "gloo";
    if (sym ~ /cpu_relax|pause/) return "spinning";
    if (dso ~ /kernel/ && sym ~ /futex/) return "kernel: futex";
    if (dso ~ /kernel/ && sym ~ /schedule|switch_to|finish_task_switch|pick_next|enqueue|dequeue|try_to_wake/) return "kernel: scheduler";
    if (dso ~ /kernel/) return "kernel: other";
    if (dso ~ /mkl|blas|gomp|iomp/) return "BLAS/OpenMP";
    if (dso ~ /python/) return "Python interpreter";
    if (dso ~ /torch_cpu|libc10|libtorch/) return "ATen/autograd";
    if (dso ~ /libc|ld-linux|libstdc/) return "libc/libstdc++";
    if (dso ~ /mgtrain/) return "mgtrain";
    return "other";
  }'

profile() {  # profile NAME LOADED COMMAND...
  local name=$1 loaded=$2
  shift 2
  if [[ $loaded == loaded ]]; then stress-ng --cpu 2 --quiet & load_pid=$!; sleep 1; fi
  perf stat -x, -e task-clock,context-switches,cpu-migrations -o "$out/$name.stat" -- "$@" >"$out/$name.log" 2>&1
  perf record -F 499 -g -o "$out/$name.data" -- "$@" >>"$out/$name.log" 2>&1
  stop_load
  perf report -i "$out/$name.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null |
    grep -E '^ +[0-9.]+%' >"$out/$name.symbols" || true
  awk "$classify"'
    { share = $1; sub(/%/, "", share); dso = $2; sym = ""; for (i = 4; i <= NF; ++i) sym = sym " " $i
      parts[part(dso, sym)] += share }
    END { for (p in parts) printf "%s\t%.1f\n", p, parts[p] }' "$out/$name.symbols" | sort -t $'\t' -k2,2 -rn >"$out/$name.parts"
}

stat_of() {  # stat_of NAME EVENT -> the count
  awk -F, -v e="$2" '$3 == e || $3 ~ "^"e { print $1 }' "$out/$1.stat" | head -1
}

for loaded in quiet loaded; do
  profile "mgtrain-$loaded" "$loaded" bash -c "$(declare -f run_mgtrain); mgtrain=$mgtrain out=$out model=$model steps=$steps world=$world run_mgtrain"
  profile "python-$loaded" "$loaded" bash -c "$(declare -f run_python); torchrun=$torchrun hidden=$hidden batch=$batch steps=$steps world=$world run_python"
done

printf '%s, world %s, %s steps, OMP_NUM_THREADS=1 (per step: the whole job, every rank)\n' "$model" "$world" "$steps"
printf '%-16s %10s %12s %12s %10s\n' run "samples/s" "CPU ms/step" "switches/step" "migr./step"
for name in mgtrain-quiet python-quiet mgtrain-loaded python-loaded; do
  rate=$(grep -o '"samples_per_s": \?[0-9.e+]*' "$out/$name.log" | head -1 | sed 's/.*: \?//')
  cpu=$(stat_of "$name" task-clock); switches=$(stat_of "$name" context-switches); migrations=$(stat_of "$name" cpu-migrations)
  awk -v n="$name" -v r="${rate:-0}" -v c="${cpu:-0}" -v s="${switches:-0}" -v m="${migrations:-0}" -v k="$steps" \
    'BEGIN { printf "%-16s %10.0f %12.2f %12.1f %10.2f\n", n, r, c / k, s / k, m / k }'
done
for name in mgtrain-quiet python-quiet mgtrain-loaded python-loaded; do
  echo; echo "$name: share of the samples by part"
  head -8 "$out/$name.parts" | awk -F '\t' '{ printf "  %-22s %5.1f%%\n", $1, $2 }'
  echo "  top symbols:"; head -6 "$out/$name.symbols" | sed 's/^ */    /' | cut -c1-140
done
