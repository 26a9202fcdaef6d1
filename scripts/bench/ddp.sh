#!/usr/bin/env bash
# Trainer benchmark: mgtrain's LibTorch DDP against PyTorch's own Python DDP (Debian python3-torch, launched by
# torchrun, gloo, OMP_NUM_THREADS=1, same model, same per-rank batch, SGD momentum 0.9, synthetic data), side by
# side in one run on the same machine, alternating the two, ROUNDS times. Reports medians and ratios of:
#   - samples/s at world 2 for MLP 784-1024-1024-10 (batch 64) and MLP 784-64-64-10 (batch 32),
#   - scaling efficiency: samples/s at world 2 / (2 x samples/s at world 1), for both,
#   - overlap: the step time at world 2 / the same step with communication off (mgtrain: ddp.skip_allreduce;
#     Python: the model without the DDP wrapper), for both.
# Usage: scripts/bench/ddp.sh            (ROUNDS=3 by default; needs build/bin/mgtrain and /usr/bin/torchrun)
#        TORCHRUN=<venv>/bin/torchrun scripts/bench/ddp.sh   (Python DDP of another torch, e.g. torch 2.x's venv from
#                                                             scripts/torch2-env.sh; its python runs the reference)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-3}
mgtrain=${MGTRAIN:-build/bin/mgtrain}
python_ref=scripts/bench/python_ddp_reference.py
if [[ -n "${TORCHRUN:-}" ]]; then
  torchrun=("$TORCHRUN" --standalone --monitor-interval 0.1)
else  # Debian's torchrun 1.13 crashes on Python 3.11 unless --redirects/--tee get a per-rank mapping
  torchrun=(/usr/bin/torchrun --standalone --monitor_interval 0.1 --redirects 9:1 --tee 9:1)
fi
echo "reference: $("${torchrun[0]%torchrun}python3" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null ||
  python3 -c 'import torch; print("torch", torch.__version__)')" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1

field() {  # field NAME: the number after "NAME": in the summary line on stdin
  grep -o '{"summary".*' | head -1 | sed -E "s/.*\"$1\": ?([0-9.e+-]+).*/\1/"
}

# mgtrain_run MODEL NPROC [overrides...] -> prints "samples_per_s step_time_ms"
mgtrain_run() {
  local model=$1 nproc=$2
  shift 2
  local out
  out=$("$mgtrain" launch --nproc "$nproc" --log-dir "$work" "configs/bench/$model.yaml" "$@" 2>/dev/null)
  echo "$(field samples_per_s <<<"$out") $(field step_time_ms <<<"$out")"
}

# python_run HIDDEN BATCH STEPS NPROC [--no-comm] -> prints "samples_per_s step_time_ms"
python_run() {
  local hidden=$1 batch=$2 steps=$3 nproc=$4
  shift 4
  local out
  out=$("${torchrun[@]}" --nproc_per_node "$nproc" "$python_ref" --hidden "$hidden" --batch "$batch" --steps "$steps" "$@" 2>/dev/null)
  echo "$(field samples_per_s <<<"$out") $(field step_time_ms <<<"$out")"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

declare -A results
record() { results[$1]+="$2"$'\n'; }

for round in $(seq 1 "$rounds"); do
  echo "round $round/$rounds" >&2
  for spec in "mlp-1024 1024,1024 64 300" "mlp-64 64,64 32 1000"; do
    read -r model hidden batch steps <<<"$spec"
    read -r m2 _ <<<"$(mgtrain_run "$model" 2)"
    read -r p2 _ <<<"$(python_run "$hidden" "$batch" "$steps" 2)"
    read -r m1 _ <<<"$(mgtrain_run "$model" 1)"
    read -r p1 _ <<<"$(python_run "$hidden" "$batch" "$steps" 1)"
    record "$model.mgtrain.w2" "$m2"
    record "$model.python.w2" "$p2"
    record "$model.mgtrain.w1" "$m1"
    record "$model.python.w1" "$p1"
  done
  read -r _ with_comm <<<"$(mgtrain_run mlp-1024 2)"
  read -r _ without_comm <<<"$(mgtrain_run mlp-1024 2 ddp.skip_allreduce=true)"
  read -r _ py_with_comm <<<"$(python_run 1024,1024 64 300 2)"
  read -r _ py_without_comm <<<"$(python_run 1024,1024 64 300 2 --no-comm)"
  record overlap.with "$with_comm"
  record overlap.without "$without_comm"
  record overlap.py_with "$py_with_comm"
  record overlap.py_without "$py_without_comm"
done

med() { printf '%s' "${results[$1]}" | median; }
printf '\n%-34s %12s %12s %10s\n' "measure (median of $rounds)" mgtrain python ratio
for model in mlp-1024 mlp-64; do
  m2=$(med "$model.mgtrain.w2"); p2=$(med "$model.python.w2")
  m1=$(med "$model.mgtrain.w1"); p1=$(med "$model.python.w1")
  printf '%-34s %12.0f %12.0f %9.2fx\n' "$model samples/s, world 2" "$m2" "$p2" "$(awk -v a="$m2" -v b="$p2" 'BEGIN{print a/b}')"
  printf '%-34s %12.0f %12.0f %9.2fx\n' "$model samples/s, world 1" "$m1" "$p1" "$(awk -v a="$m1" -v b="$p1" 'BEGIN{print a/b}')"
  me=$(awk -v a="$m2" -v b="$m1" 'BEGIN{print a/(2*b)}'); pe=$(awk -v a="$p2" -v b="$p1" 'BEGIN{print a/(2*b)}')
  printf '%-34s %12.2f %12.2f %9.2fx\n' "$model scaling efficiency 2 vs 1" "$me" "$pe" "$(awk -v a="$me" -v b="$pe" 'BEGIN{print a/b}')"
done
w=$(med overlap.with); wo=$(med overlap.without); pw=$(med overlap.py_with); pwo=$(med overlap.py_without)
printf '\n%-34s %12s %12s %10s\n' "overlap, mlp-1024, world 2" "comm on ms" "comm off ms" "on / off"
printf '%-34s %12.2f %12.2f %9.2fx\n' "mgtrain (ddp.skip_allreduce)" "$w" "$wo" "$(awk -v a="$w" -v b="$wo" 'BEGIN{print a/b}')"
printf '%-34s %12.2f %12.2f %9.2fx\n' "python (no DDP wrapper)" "$pw" "$pwo" "$(awk -v a="$pw" -v b="$pwo" 'BEGIN{print a/b}')"
