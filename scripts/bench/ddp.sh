#!/usr/bin/env bash
# Trainer benchmark: mgtrain's LibTorch DDP against PyTorch's own Python DDP (torchrun, gloo, same model, same per-rank
# batch, SGD momentum 0.9, synthetic data), side by side in one run on the same machine, ROUNDS rounds, the two
# alternating (mgtrain first in odd rounds, Python first in even ones), in two phases:
#   quiet:  nothing else running;
#   loaded: beside a 2-CPU load (`stress-ng --cpu 2`, started in this script's session, as a user's other work is).
# Both sides get OMP_NUM_THREADS=1. Models: MLP 784-1024-1024-10 (batch 64), MLP 784-64-64-10 (batch 32) and the
# Fashion-MNIST CNN (configs/bench/cnn.yaml, batch 64), each at world 2 and world 1. Reports per phase the medians of
# samples/s, the ratio of the medians, the lowest ratio of any single round, and the scaling efficiency
# (samples/s at world 2 / (2 x world 1)). The quiet phase also measures:
#   - overlap: the MLP-1024 step at world 2 / the same step with communication off (mgtrain: ddp.skip_allreduce;
#     Python: the model without the DDP wrapper);
#   - nodes on one host: MLP-1024 as two nodes of one worker each meeting on loopback (two `mgtrain launch --nnodes
#     2` agents) against two local workers, with OMP_NUM_THREADS unset (the launcher chooses), and the two nodes
#     again with every worker given every CPU (OMP_NUM_THREADS=<CPUs>: LibTorch's own choice when nobody sets it).
# Usage: scripts/bench/ddp.sh           (needs build/bin/mgtrain; stress-ng for the loaded phase)
#   ROUNDS=5                 rounds per phase (medians of ROUNDS runs of each measure)
#   PHASES="quiet loaded"    which phases
#   TORCHRUN=<venv>/bin/torchrun   Python DDP of that torch (default: torch 2.x's venv of scripts/torch2-env.sh;
#                            /usr/bin/torchrun: Debian's python3-torch 1.13)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-5}
phases=${PHASES:-quiet loaded}
mgtrain=${MGTRAIN:-build/bin/mgtrain}
torchrun_bin=${TORCHRUN:-$HOME/.cache/mgtrain/torch-2.15.0/bin/torchrun}
if [[ $torchrun_bin == /usr/bin/torchrun ]]; then  # Debian's 1.13 crashes on Python 3.11 unless --redirects/--tee get a per-rank mapping
  torchrun=(/usr/bin/torchrun --standalone --monitor_interval 0.1 --redirects 9:1 --tee 9:1)
else
  torchrun=("$torchrun_bin" --standalone --monitor-interval 0.1)
fi
python_ref=scripts/bench/python_ddp_reference.py
die() { echo "ddp.sh: $*" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "ROUNDS=$rounds: expected a positive integer"
[[ -x $mgtrain ]] || die "$mgtrain not found: build first (scripts/build.sh)"
[[ -x $torchrun_bin ]] || die "$torchrun_bin not found: scripts/torch2-env.sh makes torch 2.x's venv, or set TORCHRUN"
for phase in $phases; do [[ $phase =~ ^(quiet|loaded)$ ]] || die "PHASES: unknown phase '$phase' (quiet loaded)"; done
if [[ " $phases " == *" loaded "* ]]; then
  command -v stress-ng >/dev/null || die "stress-ng is missing (apt-get install stress-ng) for the loaded phase"
fi
cpus=$(nproc)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $cpus CPUs" >&2
echo "reference: $("${torchrun_bin%torchrun}python3" -c 'import torch; print("torch", torch.__version__)')" >&2
work=$(mktemp -d)
load_pid=""
stop_load() { if [[ -n $load_pid ]]; then kill "$load_pid" 2>/dev/null || true; wait "$load_pid" 2>/dev/null || true; fi; load_pid=""; }
trap 'stop_load; rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1

field() {  # field NAME: the number after "NAME": in the summary line on stdin
  grep -o '{"summary".*' | head -1 | sed -E "s/.*\"$1\": ?([0-9.e+-]+).*/\1/"
}

# mgtrain_run CONFIG NPROC [overrides...] -> prints "samples_per_s step_time_ms"
mgtrain_run() {
  local config=$1 nproc=$2
  shift 2
  local out
  out=$("$mgtrain" launch --nproc "$nproc" --log-dir "$work" "configs/bench/$config.yaml" "$@" 2>/dev/null) || true
  echo "$(field samples_per_s <<<"$out") $(field step_time_ms <<<"$out")"
}

# python_run NPROC ARGS... -> prints "samples_per_s step_time_ms"
python_run() {
  local nproc=$1
  shift
  local out
  out=$("${torchrun[@]}" --nproc_per_node "$nproc" "$python_ref" "$@" 2>/dev/null) || true
  echo "$(field samples_per_s <<<"$out") $(field step_time_ms <<<"$out")"
}

# two_nodes [OMP] -> samples/s of MLP-1024 as two one-worker nodes meeting on loopback (OMP_NUM_THREADS unset, or OMP)
two_nodes() {
  local port out
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local node=("$mgtrain" launch --nnodes 2 --master-addr 127.0.0.1 --master-port "$port" --nproc 1 --log-dir "$work"
    --run-id "nodes-$RANDOM" configs/bench/mlp-1024.yaml)
  (if [[ -n ${1:-} ]]; then export OMP_NUM_THREADS=$1; else unset OMP_NUM_THREADS; fi
   "${node[@]}" --node-rank 1 >/dev/null 2>&1 &
   out=$("${node[@]}" --node-rank 0 2>/dev/null) || true
   wait
   field samples_per_s <<<"$out")
}
local_workers_unset() { (unset OMP_NUM_THREADS; mgtrain_run mlp-1024 2 | cut -d' ' -f1); }

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
declare -A results
record() { results[$1]+="$2"$'\n'; }
med() { printf '%s' "${results[$1]}" | median; }
lowest() { printf '%s' "${results[$1]}" | sort -g | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# The models: NAME CONFIG PYTHON-ARGS
models=("mlp-1024|mlp-1024|--hidden 1024,1024 --batch 64 --steps 300"
        "mlp-64|mlp-64|--hidden 64,64 --batch 32 --steps 1000"
        "cnn|cnn|--cnn --batch 64 --steps 150")

for phase in $phases; do
  if [[ $phase == loaded ]]; then stress-ng --cpu 2 --quiet & load_pid=$!; sleep 2; fi
  for round in $(seq 1 "$rounds"); do
    echo "$phase: round $round/$rounds" >&2
    for spec in "${models[@]}"; do
      IFS='|' read -r name config python_args <<<"$spec"
      for world in 2 1; do
        if ((round % 2)); then
          read -r m _ <<<"$(mgtrain_run "$config" "$world")"
          read -r p _ <<<"$(python_run "$world" $python_args)"
        else
          read -r p _ <<<"$(python_run "$world" $python_args)"
          read -r m _ <<<"$(mgtrain_run "$config" "$world")"
        fi
        record "$phase.$name.w$world.m" "${m:-0}"
        record "$phase.$name.w$world.p" "${p:-0}"
        record "$phase.$name.w$world.ratio" "$(ratio "${m:-0}" "${p:-0}")"
      done
    done
    if [[ $phase == quiet ]]; then
      read -r _ with_comm <<<"$(mgtrain_run mlp-1024 2)"
      read -r _ without_comm <<<"$(mgtrain_run mlp-1024 2 ddp.skip_allreduce=true)"
      read -r _ py_with_comm <<<"$(python_run 2 --hidden 1024,1024 --batch 64 --steps 300)"
      read -r _ py_without_comm <<<"$(python_run 2 --hidden 1024,1024 --batch 64 --steps 300 --no-comm)"
      record overlap.with "$with_comm"; record overlap.without "$without_comm"
      record overlap.py_with "$py_with_comm"; record overlap.py_without "$py_without_comm"
      record nodes.two "$(two_nodes)"
      record nodes.local "$(local_workers_unset)"
      record nodes.every_cpu "$(two_nodes "$cpus")"
    fi
  done
  stop_load
done

for phase in $phases; do
  if [[ $phase == quiet ]]; then echo; echo "quiet (nothing else running), medians of $rounds"; else
    echo; echo "loaded (beside stress-ng --cpu 2), medians of $rounds"; fi
  printf '%-26s %12s %12s %8s %13s\n' "samples/s" mgtrain python ratio "lowest round"
  for spec in "${models[@]}"; do
    IFS='|' read -r name _ _ <<<"$spec"
    for world in 2 1; do
      m=$(med "$phase.$name.w$world.m"); p=$(med "$phase.$name.w$world.p")
      printf '%-26s %12.0f %12.0f %7sx %12sx\n' "$name, world $world" "$m" "$p" "$(ratio "$m" "$p")" \
        "$(lowest "$phase.$name.w$world.ratio")"
    done
    m2=$(med "$phase.$name.w2.m"); m1=$(med "$phase.$name.w1.m"); p2=$(med "$phase.$name.w2.p"); p1=$(med "$phase.$name.w1.p")
    printf '%-26s %12s %12s\n' "$name, scaling 2 vs 1" "$(ratio "$m2" "$(awk -v a="$m1" 'BEGIN{print 2*a}')")" \
      "$(ratio "$p2" "$(awk -v a="$p1" 'BEGIN{print 2*a}')")"
  done
done

if [[ " $phases " == *" quiet "* ]]; then
  w=$(med overlap.with); wo=$(med overlap.without); pw=$(med overlap.py_with); pwo=$(med overlap.py_without)
  printf '\n%-34s %12s %12s %10s\n' "overlap, mlp-1024, world 2 (quiet)" "comm on ms" "comm off ms" "on / off"
  printf '%-34s %12.2f %12.2f %9sx\n' "mgtrain (ddp.skip_allreduce)" "$w" "$wo" "$(ratio "$w" "$wo")"
  printf '%-34s %12.2f %12.2f %9sx\n' "python (no DDP wrapper)" "$pw" "$pwo" "$(ratio "$pw" "$pwo")"
  two=$(med nodes.two); local=$(med nodes.local); every=$(med nodes.every_cpu)
  printf '\n%-58s %12s %10s\n' "mlp-1024, 2 workers on this host, OMP_NUM_THREADS unset" "samples/s" "vs local"
  printf '%-58s %12.0f %9sx\n' "two local workers (one launcher)" "$local" "1.00"
  printf '%-58s %12.0f %9sx\n' "two nodes of one worker (two launchers, loopback)" "$two" "$(ratio "$two" "$local")"
  printf '%-58s %12.0f %9sx\n' "the same, each worker OMP_NUM_THREADS=$cpus (every CPU)" "$every" "$(ratio "$every" "$local")"
fi
