#!/usr/bin/env bash
# Time-to-accuracy benchmark: mgtrain's default job (configs/fashion_mnist_cnn.yaml, 2 CPU workers, gloo) against
# the same training in Python DDP (scripts/bench/fmnist_reference.py under torch 2.x's torchrun), side by side on
# one machine, alternating the two, ROUNDS times. Both get OMP_NUM_THREADS=1 and the same model, initialisation,
# data order and hyper-parameters (the reference takes them from `mgtrain config show`); both evaluate on the full
# test split every EVAL_EVERY steps and at no other point. A run's time is the wall time from starting its command
# (`mgtrain launch` / `torchrun`) until its first eval line with accuracy >= TARGET reaches this script; the run
# is then stopped. Reports the medians, their ratio (goal: mgtrain <= 0.5x Python) and the accuracy both reached at
# every eval of the last round, to show the two trainings are comparable.
#
# Usage: scripts/bench/time_to_accuracy.sh
#   ROUNDS=1        rounds (each runs both)          TARGET=0.92   accuracy to reach
#   EVAL_EVERY=200  steps between evals (both)       MAX_STEPS=0   train.max_steps (0: the config's 10 epochs;
#                                                                  it also shortens the cosine schedule, on both)
#   NPROC=2         workers                          DATA=         data.path (default: the config's)
#   DEVICE=cpu      cpu (gloo), or cuda: one GPU a rank on both sides (NCCL; the launcher samples the GPU every
#                   second into the run's resources.jsonl, kept under LOG_DIR)
#   MGTRAIN=build/bin/mgtrain                        TORCHRUN=$HOME/.cache/mgtrain/torch-2.15.0/bin/torchrun
#   LOG_DIR=        keep every run's output there (default: a temporary directory, removed at the end)
# mgtrain runs without checkpoints (checkpoint.dir=): the reference writes none either. Its metrics.jsonl and
# TensorBoard files are written as in any run. A quick check of both halves:
#   TARGET=0.5 MAX_STEPS=60 EVAL_EVERY=20 scripts/bench/time_to_accuracy.sh
set -euo pipefail
export LC_ALL=C  # EPOCHREALTIME and awk with a decimal point
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-1}
target=${TARGET:-0.92}
eval_every=${EVAL_EVERY:-200}
max_steps=${MAX_STEPS:-0}
nproc=${NPROC:-2}
device=${DEVICE:-cpu}
mgtrain=${MGTRAIN:-build/bin/mgtrain}
torchrun=${TORCHRUN:-$HOME/.cache/mgtrain/torch-2.15.0/bin/torchrun}
config=configs/fashion_mnist_cnn.yaml
reference=scripts/bench/fmnist_reference.py
export OMP_NUM_THREADS=1

die() { echo "time_to_accuracy.sh: $*" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "ROUNDS=$rounds: expected a positive integer"
[[ $eval_every =~ ^[1-9][0-9]*$ ]] || die "EVAL_EVERY=$eval_every: expected a positive integer (steps between evals)"
[[ $max_steps =~ ^[0-9]+$ ]] || die "MAX_STEPS=$max_steps: expected 0 (all epochs) or a positive integer"
[[ $nproc =~ ^[1-9][0-9]*$ ]] || die "NPROC=$nproc: expected a positive integer"
[[ $device =~ ^(cpu|cuda)$ ]] || die "DEVICE=$device: expected cpu or cuda"
awk -v t="$target" 'BEGIN { exit !(t ~ /^(0?\.[0-9]+|1(\.0*)?)$/ && t > 0) }' ||
  die "TARGET=$target: expected an accuracy in (0, 1], e.g. 0.92"
[[ -x $mgtrain ]] || die "MGTRAIN=$mgtrain: not an executable (build it: scripts/build.sh mgtrain mgtrain-worker)"
[[ -x $torchrun ]] || die "TORCHRUN=$torchrun: not an executable (torch 2.x's torchrun: scripts/torch2-env.sh)"

if [[ -n ${LOG_DIR:-} ]]; then
  work=$LOG_DIR
  mkdir -p "$work" || die "LOG_DIR=$work: cannot create it"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

# mgtrain's side: the shipped config, evals only every EVAL_EVERY steps, no checkpoints, on DEVICE.
overrides=(train.eval_every_steps="$eval_every" train.eval_at_epoch_end=false checkpoint.dir= train.device="$device")
[[ $device == cpu ]] || overrides+=(log.resource_interval_s=1)
[[ $max_steps == 0 ]] || overrides+=(train.max_steps="$max_steps")
[[ -z ${DATA:-} ]] || overrides+=(data.path="$DATA")
yaml=$("$mgtrain" config show "$config" "${overrides[@]}") || die "mgtrain config show $config ${overrides[*]} failed (above)"

cfg() {  # cfg SECTION.KEY: its value in the merged config
  awk -v section="${1%%.*}" -v key="${1#*.}" '
    /^[^ #]/ { inside = ($0 ~ "^" section ":"); next }
    inside && $1 == key ":" { sub(/^[^:]*: */, ""); sub(/ +#.*/, ""); gsub(/^["'\'']|["'\'']$/, ""); print; found = 1; exit }
    END { exit !found }' <<<"$yaml" || die "mgtrain config show printed no $1"
}
require() {  # require KEY VALUE...: the reference mirrors only these values of KEY
  local value
  value=$(cfg "$1")
  for allowed in "${@:2}"; do [[ $value == "$allowed" ]] && return 0; done
  die "$config has $1: $value; $reference mirrors only $1: ${*:2}"
}
require model.type cnn
require model.batch_norm true
require data.dataset mnist
require data.shuffle true
require data.drop_last false
require train.grad_accum_steps 1
require train.precision fp32
require optim.name sgd
require optim.nesterov false
require optim.schedule cosine linear constant
require optim.scale_lr_with_world_size false
require ddp.broadcast_buffers true
require ddp.sync_batch_norm false
awk -v d="$(cfg model.dropout)" -v c="$(cfg train.clip_grad_norm)" 'BEGIN { exit !(d == 0 && c == 0) }' ||
  die "$config sets model.dropout or train.clip_grad_norm; $reference mirrors neither"

data_dir=$(cfg data.path)
[[ -d $data_dir ]] || die "data.path $data_dir: no such directory (Debian: apt-get install dataset-fashion-mnist; or DATA=)"
reference_args=(--data "$data_dir" --channels "$(cfg model.channels)" --fc "$(cfg model.fc_sizes)"
  --epochs "$(cfg train.epochs)" --max-steps "$(cfg train.max_steps)" --batch "$(cfg train.batch_size)"
  --seed "$(cfg train.seed)" --lr "$(cfg optim.lr)" --momentum "$(cfg optim.momentum)"
  --weight-decay "$(cfg optim.weight_decay)" --schedule "$(cfg optim.schedule)" --warmup-steps "$(cfg optim.warmup_steps)"
  --min-lr "$(cfg optim.min_lr)" --eval-every-steps "$(cfg train.eval_every_steps)" --no-eval-at-epoch-end
  --target-accuracy "$target" --device "$device")

ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# parse_eval KIND LINE: sets eval_step, eval_loss and eval_accuracy when LINE is an eval line of KIND (mgtrain | python).
mgtrain_eval_re='mgtrain: eval \([^,]*, step ([0-9]+)\): loss ([^ ]+) accuracy ([0-9.]+)'
python_eval_re='\{"eval": \{"step": ([0-9]+),.*"loss": ([^,]+), "accuracy": ([0-9.e-]+)'
parse_eval() {
  if [[ $1 == mgtrain ]]; then
    [[ $2 =~ $mgtrain_eval_re ]] || return 1
  else
    [[ $2 =~ $python_eval_re ]] || return 1
  fi
  eval_step=${BASH_REMATCH[1]}
  eval_loss=${BASH_REMATCH[2]}
  eval_accuracy=${BASH_REMATCH[3]}
}

# timed_run KIND LOG COMMAND...: runs it, stamps each eval line on arrival into LOG.evals ("step seconds accuracy loss"),
# and sets `reached` to the seconds until the first accuracy >= target ("" if never). mgtrain is then stopped with
# SIGTERM (its launcher stops the workers); the reference stops by itself (--target-accuracy).
timed_run() {
  local kind=$1 log=$2 fd pid line now rc=0
  shift 2
  reached=""
  : >"$log.evals"
  local t0=$EPOCHREALTIME
  exec {fd}< <(exec "$@" 2>"$log.err")
  pid=$!
  while IFS= read -r -u "$fd" line; do
    now=$EPOCHREALTIME
    printf '%s\n' "$line" >>"$log"
    parse_eval "$kind" "$line" || continue
    local seconds
    seconds=$(awk -v a="$now" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
    echo "$eval_step $seconds $eval_accuracy $eval_loss" >>"$log.evals"
    if [[ -z $reached ]] && ge "$eval_accuracy" "$target"; then
      reached=$seconds
      [[ $kind != mgtrain ]] || kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  exec {fd}<&-
  wait "$pid" || rc=$?
  if [[ -z $reached && $rc != 0 ]]; then
    echo "time_to_accuracy.sh: the $kind run failed (exit $rc); the end of its stderr ($log.err):" >&2
    tail -n 15 "$log.err" >&2
    exit 1
  fi
}

declare -A times
for round in $(seq 1 "$rounds"); do
  order=(mgtrain python)
  ((round % 2)) || order=(python mgtrain)
  for kind in "${order[@]}"; do
    log=$work/$kind-$round.log
    echo "round $round/$rounds: $kind ..." >&2
    if [[ $kind == mgtrain ]]; then
      timed_run mgtrain "$log" "$mgtrain" launch --nproc "$nproc" --log-dir "$work/mgtrain-runs" "$config" "${overrides[@]}"
    else
      timed_run python "$log" "$torchrun" --standalone --nproc-per-node "$nproc" --monitor-interval 0.1 \
        --redirects 9:1 --tee 9:1 "$reference" "${reference_args[@]}"
    fi
    last=$(tail -n 1 "$log.evals")
    echo "round $round/$rounds: $kind: ${reached:+reached $target after $reached s; }last eval (step, s, accuracy, loss): ${last:-none}" >&2
    times[$kind]+="${reached:-none}"$'\n'
  done
done

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
steps_per_epoch=$(sed -nE 's/.*steps \(([0-9]+) per epoch\).*/\1/p' "$work/python-$rounds.log.err" | head -1)

echo
echo "test accuracy and loss at each eval, round $rounds (s: seconds since the command started)"
printf '%6s %6s | %-8s %8s %8s | %-8s %8s %8s\n' step epoch "mgtrain" "loss" "s" "python" "loss" "s"
join -a1 -a2 -e - -o 0,1.2,1.3,1.4,2.2,2.3,2.4 <(sort -k1,1 "$work/mgtrain-$rounds.log.evals") \
  <(sort -k1,1 "$work/python-$rounds.log.evals") | sort -n |
  awk -v spe="${steps_per_epoch:-0}" '{
    epoch = "-"
    if (spe > 0) epoch = sprintf("%.2f", $1 / spe)
    python_loss = $7
    if (python_loss != "-") python_loss = sprintf("%.4f", python_loss)
    printf "%6d %6s | %-8s %8s %8s | %-8s %8s %8s\n", $1, epoch, $3, $4, $2, $6, python_loss, $5
  }'

echo
if grep -qx none <<<"${times[mgtrain]}${times[python]}"; then
  echo "target $target not reached in every round (seconds, per round: mgtrain $(paste -sd' ' <<<"${times[mgtrain]%$'\n'}"), python $(paste -sd' ' <<<"${times[python]%$'\n'}"))"
  [[ -z ${LOG_DIR:-} ]] || echo "logs: $work"
  exit 1
fi
m=$(printf '%s' "${times[mgtrain]}" | median)
p=$(printf '%s' "${times[python]}" | median)
printf '%-40s %10s %10s %8s %8s\n' "time to accuracy $target (median of $rounds)" mgtrain python ratio goal
printf '%-40s %9.1fs %9.1fs %7.2fx %8s\n' "wall time, launch -> first eval >= $target" "$m" "$p" \
  "$(awk -v a="$m" -v b="$p" 'BEGIN { print a / b }')" "<= 0.5x"
[[ -z ${LOG_DIR:-} ]] || echo "logs: $work"
