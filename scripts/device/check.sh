#!/usr/bin/env bash
# The GPU check: run from a bundle that scripts/device/pack.sh made (BUNDLE/check.sh), on a machine with an NVIDIA
# GPU, its driver and a Python whose torch has the bundle's version (docs/gpu.md, "Checking a GPU machine without
# network"). It needs no network, no compiler and nothing installed beyond that Python. One step after another, each
# under its own timeout and all within CHECK_BUDGET_S (default 480 s); a failing step never stops the rest:
#   bundle          every file as packed (bundle.sha256), the Python's torch = the bundle's, every library resolves
#   nvidia-smi      the GPU, its driver and memory
#   probe, env      mgtrain-worker --probe (CUDA, NCCL, device) and mgtrain env
#   gpu-tests       every [gpu] test case of test_gpu
#   train-M-P       mgtrain launch --nproc 1 on the GPU: M = cnn (Fashion-MNIST), gpt (char-level text); P = fp32,
#                   bf16, fp16: the loss falls, gpu_peak_mib is reported, fp16 skips at most 10 steps
#   nccl-world-1    NCCL through the reducer at world 1 (ddp.force_process_group), shut down without a warning
#   shared-gpu      two ranks on one GPU: gloo trains, NCCL is refused with mgtrain's message
#   crash-resume    kill -9 a rank after its first checkpoint (--max-restarts 1): it resumes from the snapshot in memory
#                   of that step (copied from the GPU), and the final checkpoint is bit-identical to an uninterrupted run's
#   gpu-ids-auto    --gpu-ids auto through the real NVML
#   memory-fraction train.gpu_memory_fraction ends in CUDA's out-of-memory error
#   time-to-accuracy  Fashion-MNIST CNN to 0.92 test accuracy, mgtrain against Python under the device's torchrun,
#                   with the GPU utilisation the launcher's sampler saw
#   step-bench      scripts/bench/gpu_step.sh against the device's Python torch (eager and DDP), fp32 and bf16
# Writes gpu-check.json (one record per step: name, status pass/fail/skip, seconds, figures) and gpu-check.log (every
# step's output) into --out DIR, else $OUT when set, else ./gpu-check.
#
# Usage: BUNDLE/check.sh [--dry-run] [--only STEP[,STEP...]] [--out DIR]
#   --dry-run   no GPU needed: the steps that can run on the CPU do (short, train.device=cpu), the rest are skipped;
#               checks the bundle, the plumbing and the JSON (CI runs it against the LibTorch 2.x flavour)
#   PYTHON=...  the Python with the torch whose libraries the binaries load (default python3)
#   CHECK_BUDGET_S=480  the wall-time budget of all steps together
#   MODELS=..., PRECISIONS=...  the step benchmark's rows (default "cnn gpt gpt-large" and "fp32 bf16")
# Exit: 0 every step passed or was skipped; 1 a step failed; 2 bad usage or no bundle.
set -uo pipefail
export LC_ALL=C

die() { echo "check.sh: $*" >&2; exit 2; }
self=$(readlink -f "$0")
root=$(cd "$(dirname "$self")/../.." && pwd)
bin=$root/bin
tests=$root/tests

# ---------------------------------------------------------------------------------------------------------------------
# Inside one step (the script runs itself with --run-step NAME under `timeout`).

fig() { printf '%s\t%s\n' "$1" "$(printf '%s' "${*:2}" | tr '\n\t' '  ')" >>"$steps_dir/$step.fig"; }
fail() { fig note "$*"; echo "FAIL: $*"; exit 1; }
skip() { fig note "$*"; echo "SKIP: $*"; exit 77; }
helper() { "$PYTHON" "$root/scripts/device/check_helpers.py" "$@"; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# launch RUN_ID ARGS...: mgtrain launch into $work/runs/RUN_ID; output in $work/RUN_ID.out/.err (and this step's log).
launch() {
  local id=$1 rc=0
  shift
  "$bin/mgtrain" launch --log-dir "$work/runs" --run-id "$id" "$@" >"$work/$id.out" 2>"$work/$id.err" || rc=$?
  echo "\$ mgtrain launch --run-id $id $* -> exit $rc"
  tail -n 40 "$work/$id.out"
  tail -n 40 "$work/$id.err"
  return $rc
}

# read_summary FILE: the summary line's values in S[key].
declare -A S
read_summary() {
  local kv
  S=()
  kv=$(helper summary "$1") || return 1
  while IFS='=' read -r key value; do S[$key]=$value; done <<<"$kv"
}

tiny_mlp=(model.type=mlp model.hidden_sizes=64 data.dataset=synthetic data.input_shape=1,8,8 data.synthetic_samples=2048
          train.epochs=1 checkpoint.dir=)

step_bundle() {
  cd "$root" || fail "cannot enter $root"
  sha256sum -c --quiet bundle.sha256 || fail "files differ from bundle.sha256 (above): the bundle was changed or copied incompletely"
  fig files "$(wc -l <bundle.sha256)"
  fig size_mib "$(du -sm . | cut -f1)"
  local want want_cuda
  want=$(sed -n 's/^torch_version=//p' bundle-info)
  want_cuda=$(sed -n 's/^torch_cuda=//p' bundle-info)
  fig bundle_torch "$want"
  fig python "$PYTHON"
  [[ -n $torch_version ]] || fail "$PYTHON cannot import torch (PYTHON= names the Python with the device's torch)"
  fig python_torch "$torch_version"
  [[ ${torch_version%%+*} == "$want" ]] ||
    fail "the bundle was built against LibTorch $want but $PYTHON has torch $torch_version: LibTorch's C++ ABI changes" \
         "between versions; pack a bundle for ${torch_version%%+*} (scripts/device/torch-version, then scripts/device/pack.sh)"
  [[ ${torch_cuda%%.*} == "${want_cuda%%.*}" ]] ||
    fail "the bundle's LibTorch is for CUDA $want_cuda, $PYTHON's torch for CUDA ${torch_cuda:-none}"
  # Every library of every binary resolves: into the bundle's lib/, the torch's folders, or the C runtime and driver.
  local binary line lib path bad=() count=0
  local base
  base=$(cat scripts/device/machine-libraries) || fail "no scripts/device/machine-libraries in the bundle"
  for binary in bin/* tests/*; do
    count=$((count + 1))
    while read -r line; do
      if [[ $line == *"not found"* ]]; then  # a library, or a symbol version (GLIBC_2.3x: an older C library)
        bad+=("$binary: $line")
        continue
      fi
      [[ $line == *"=>"* ]] || continue
      lib=${line%% *}
      path=$(readlink -f "$(sed -E 's/.*=> ([^ ]*).*/\1/' <<<"$line")")
      if [[ $path != "$root/lib/"* && ! $lib =~ $base ]]; then
        local inside=false dir
        for dir in ${LD_LIBRARY_PATH//:/ }; do [[ $path == "$dir/"* ]] && inside=true; done
        $inside || bad+=("$binary: $lib comes from $path, outside the bundle and torch (pack.sh must carry it)")
      fi
    done < <(ldd "$binary" 2>&1)
  done
  fig binaries "$count"
  fig glibc "$(ldd --version 2>&1 | head -n 1 | grep -o '[0-9][0-9.]*$')"
  fig glibc_required "$(sed -n 's/^glibc_required=//p' bundle-info)"
  fig bundled_libraries "$(ls lib | tr '\n' ' ')"
  ((${#bad[@]} == 0)) || { printf '%s\n' "${bad[@]}"; fail "${#bad[@]} library problem(s): ${bad[0]}"; }
  echo "every library of $count binaries resolves"
}

step_nvidia_smi() {
  nvidia-smi || fail "nvidia-smi failed (driver?)"
  local q
  q=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0) || fail "nvidia-smi --query-gpu failed"
  fig gpu "$(cut -d, -f1 <<<"$q" | xargs)"
  fig driver "$(cut -d, -f2 <<<"$q" | xargs)"
  fig memory "$(cut -d, -f3 <<<"$q" | xargs)"
  fig gpus "$(nvidia-smi -L | grep -c '^GPU ')"
}

step_probe() {
  "$bin/mgtrain-worker" --probe >"$work/probe.json" || fail "mgtrain-worker --probe failed (above)"
  cat "$work/probe.json"
  local kv key value
  kv=$(helper flat "$work/probe.json") || fail "the probe's output is not JSON"
  declare -A P
  while IFS='=' read -r key value; do P[$key]=$value; fig "$key" "$value"; done <<<"$kv"
  [[ ${P[built_with_cuda]:-} == true ]] || fail "mgtrain-worker is not a CUDA build"
  [[ $device == cpu || ${P[cuda_available]:-} == true ]] || fail "mgtrain-worker sees no GPU"
}

step_env() {
  "$bin/mgtrain" env --json >"$work/env.json" || fail "mgtrain env --json failed (above)"
  cat "$work/env.json"
  helper flat "$work/env.json" >"$work/env.flat" || fail "mgtrain env --json printed no JSON"
  grep -iE '(torch|cuda|nccl|gpu|python)[^=]*=' "$work/env.flat" | head -n 20 | while IFS='=' read -r key value; do fig "$key" "$value"; done
  grep -q 'built_with_cuda=true' "$work/env.flat" || fail "mgtrain env says this is not a CUDA build"
}

step_gpu_tests() {
  local filter="[gpu]" rc=0
  [[ $device == cuda ]] || filter="[device],[dp]"  # the dry run: the CPU cases of the same binary
  MGTRAIN_TEST_BIN_DIR=$bin "$tests/test_gpu" "$filter" >"$work/gpu-tests.out" 2>&1 || rc=$?
  cat "$work/gpu-tests.out"
  fig filter "$filter"
  fig skipped_cases "$(grep -c 'skipped:' "$work/gpu-tests.out")"
  local last
  last=$(grep -E '^(All tests passed|test cases:)' "$work/gpu-tests.out" | tail -n 1)
  fig result "$last"
  ((rc == 0)) || fail "test_gpu $filter: exit $rc: $last"
  [[ -n $last ]] || fail "test_gpu $filter printed no result line"
}

tokens() {  # a char-level token file of the bundle's text (docs/), made once
  [[ -f $work/tokens/train.bin ]] || "$bin/mgtrain" tokenize "$root/data/text.txt" "$work/tokens" --level char >&2 ||
    fail "mgtrain tokenize failed (above)"
  echo "$work/tokens/train.bin"
}

step_train() {  # step_train MODEL PRECISION
  local model=$1 precision=$2 steps args=()
  case $model in
    cnn) steps=600; args=("$root/configs/fashion_mnist_cnn.yaml" data.path="$root/data/fashion-mnist") ;;
    gpt) steps=400; local tokens; tokens=$(tokens) || fail "no token file"
         args=("$root/configs/tokens_gpt.yaml" data.path="$tokens") ;;
  esac
  if [[ $device == cpu ]]; then  # the dry run: a few steps, and a GPT small enough for a CPU
    steps=30
    [[ $model == cnn ]] || args+=(model.layers=1 model.heads=2 model.d_model=64 model.context_length=64)
  fi
  launch "$step" --nproc 1 "${args[@]}" train.device="$device" train.precision="$precision" train.max_steps=$steps \
    train.eval_at_epoch_end=false checkpoint.dir= log.every_steps=$((steps / 10)) || fail "the run failed (above)"
  read_summary "$work/$step.out" || fail "no summary line"
  local losses first last rows
  losses=$(helper losses "$work/runs/$step/metrics.jsonl") || fail "no losses in metrics.jsonl"
  read -r first last rows <<<"$losses"
  fig first_loss "$first"; fig final_loss "$last"; fig steps "${S[steps]}"
  fig step_time_ms "${S[step_time_ms]}"; fig samples_per_s "${S[samples_per_s]}"; fig device "${S[device]}"
  [[ -z ${S[gpu_peak_mib]:-} ]] || fig gpu_peak_mib "${S[gpu_peak_mib]}"
  [[ -z ${S[skipped_steps]:-} ]] || { fig skipped_steps "${S[skipped_steps]}"; fig loss_scale "${S[loss_scale]}"; }
  lt "$last" "$first" || fail "the loss did not fall: first $first, last $last ($rows rows)"
  [[ $device == cpu ]] && return 0
  [[ ${S[device]} == cuda* ]] || fail "trained on ${S[device]}, not the GPU"
  [[ -n ${S[gpu_peak_mib]:-} ]] && lt 0 "${S[gpu_peak_mib]}" || fail "no gpu_peak_mib in the summary"
  if [[ $precision == fp16 ]]; then
    ((${S[skipped_steps]:-99} <= 10)) || fail "${S[skipped_steps]:-?} fp16 steps skipped (more than the first back-offs)"
    lt 0.99 "${S[loss_scale]}" || fail "the loss scale fell to ${S[loss_scale]}"
  fi
}

step_nccl_world_1() {
  local backend=nccl
  [[ $device == cuda ]] || backend=gloo
  launch "$step" --nproc 1 "${tiny_mlp[@]}" train.device="$device" ddp.backend=$backend ddp.force_process_group=true ||
    fail "the run failed (above)"
  read_summary "$work/$step.out" || fail "no summary line"
  fig backend "${S[backend]}"; fig step_time_ms "${S[step_time_ms]}"
  [[ ${S[backend]} == "$backend"* ]] || fail "backend ${S[backend]}, not $backend"
  ! grep -q destroy_process_group "$work/$step.err" || fail "a destroy_process_group warning at exit: not shut down in order"
}

step_shared_gpu() {
  local rc=0
  CUDA_VISIBLE_DEVICES=0 launch shared-gloo --nproc 2 "${tiny_mlp[@]}" train.device=cuda ddp.backend=gloo ||
    fail "two ranks over gloo on one GPU failed (above)"
  read_summary "$work/shared-gloo.out" && [[ ${S[world_size]} == 2 ]] || fail "gloo on one GPU: no summary of world 2"
  fig gloo "world ${S[world_size]} on ${S[device]}, step ${S[step_time_ms]} ms"
  CUDA_VISIBLE_DEVICES=0 launch shared-nccl --nproc 2 "${tiny_mlp[@]}" train.device=cuda ddp.backend=nccl || rc=$?
  ((rc != 0)) || fail "two ranks over NCCL on one GPU were not refused"
  local message
  message=$(grep -h -m1 'would share one GPU' "$work/shared-nccl.err" "$work/shared-nccl.out")
  [[ -n $message ]] || fail "NCCL on one GPU failed (exit $rc) without mgtrain's 'would share one GPU' message"
  fig nccl_refusal "exit $rc: $message"
}

step_crash_resume() {
  local steps=6000 every=1000
  [[ $device == cuda ]] || { steps=600; every=100; }
  local args=(--nproc 1 model.type=mlp model.hidden_sizes=256,256 data.dataset=synthetic data.input_shape=1,28,28
              data.synthetic_samples=20000 train.batch_size=64 train.max_steps=$steps train.device="$device"
              train.eval_at_epoch_end=false checkpoint.every_steps=$every log.every_steps=50)
  launch crash-a "${args[@]}" || fail "the uninterrupted run failed (above)"
  # The interrupted run: SIGKILL its worker once rank 0 announced the first checkpoint.
  "$bin/mgtrain" launch --log-dir "$work/runs" --run-id crash-b --max-restarts 1 "${args[@]}" \
    >"$work/crash-b.out" 2>"$work/crash-b.err" &
  local launcher=$! log=$work/runs/crash-b/attempt_0/rank_0/stdout.log victim="" i
  for ((i = 0; i < 1200; i++)); do
    if grep -qs 'checkpoint (every_steps) step' "$log"; then
      victim=$(pgrep -P "$launcher" -f mgtrain-worker | head -n 1)
      break
    fi
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.05
  done
  [[ -n $victim ]] || { wait "$launcher"; fail "the run ended, or made no checkpoint in 60 s, before a worker could be killed"; }
  kill -KILL "$victim"
  fig killed_after "$(grep -o 'checkpoint (every_steps) step [0-9]*' "$log" | tail -n 1)"
  local rc=0
  wait "$launcher" || rc=$?
  tail -n 20 "$work/crash-b.out" "$work/crash-b.err"
  ((rc == 0)) || fail "the restarted run failed: exit $rc"
  [[ -d $work/runs/crash-b/attempt_1 ]] || fail "no attempt_1: the launcher did not restart"
  fig resumed "$(grep -h -o 'resumed from [^:]*: step [0-9]*' "$work/runs/crash-b/attempt_1/rank_0/stdout.log" | sed 's|.*/||')"
  local a b
  a=$(ls "$work/runs/crash-a/checkpoints/"checkpoint-step*.safetensors | tail -n 1)
  b=$(ls "$work/runs/crash-b/checkpoints/"checkpoint-step*.safetensors | tail -n 1)
  [[ -n $a && ${a##*/} == "${b##*/}" ]] || fail "the runs' last checkpoints differ in step: ${a##*/} vs ${b##*/}"
  fig checkpoint "${a##*/}"
  local verdict
  verdict=$(helper same-checkpoint "$a" "$b") || fail "not bit-identical: $verdict"
  fig identical "$verdict"
}

step_gpu_ids_auto() {
  launch "$step" --nproc 1 --gpu-ids auto "${tiny_mlp[@]}" train.device="$device" || fail "the run failed (above)"
  local line
  line=$(grep -h -m1 -- '--gpu-ids auto' "$work/$step.err" "$work/$step.out")
  fig line "$line"
  [[ -n $line ]] || fail "the launcher printed no --gpu-ids auto line"
  [[ $device == cpu || $line == *"with the most free memory"* ]] || fail "not chosen through NVML: $line"
}

step_memory_fraction() {
  local rc=0
  launch "$step" --nproc 1 "${tiny_mlp[@]}" train.device=cuda train.gpu_memory_fraction=0.000001 || rc=$?
  ((rc != 0)) || fail "a cap of about 100 KB did not stop the run"
  local message
  message=$(grep -h -m1 'out of memory' "$work/$step.err" "$work/$step.out")
  fig exit "$rc"; fig message "$message"
  [[ -n $message ]] || fail "exit $rc without CUDA's out-of-memory message"
  ! grep -q 'call init' "$work/$step.err" || fail "the cap was set on an uninitialised allocator"
  ! grep -q 'frame #' "$work/$step.err" || fail "the message carries LibTorch's C++ backtrace, not one clear line"
}

step_time_to_accuracy() {
  local torchrun
  torchrun=$(dirname "$(command -v "$PYTHON")")/torchrun
  [[ -x $torchrun ]] || fail "no torchrun next to $PYTHON"
  local settings=(DEVICE=cuda NPROC=1 ROUNDS=1)
  [[ $device == cuda ]] || settings=(DEVICE=cpu NPROC=1 ROUNDS=1 TARGET=0.5 MAX_STEPS=60 EVAL_EVERY=20)
  env "${settings[@]}" LOG_DIR="$work/tta" MGTRAIN="$bin/mgtrain" TORCHRUN="$torchrun" DATA="$root/data/fashion-mnist" \
    "$root/scripts/bench/time_to_accuracy.sh" >"$work/tta.out" 2>"$work/tta.err"
  local rc=$?
  cat "$work/tta.out"; tail -n 20 "$work/tta.err"
  fig settings "${settings[*]}"
  ((rc == 0)) || fail "time_to_accuracy.sh failed: exit $rc"
  local m p r
  read -r m p r < <(sed -nE 's/^wall time, launch -> first eval.* ([0-9.]+)s +([0-9.]+)s +([0-9.]+)x.*/\1 \2 \3/p' "$work/tta.out")
  [[ -n $r ]] || fail "no result line in its output"
  fig mgtrain_s "$m"; fig python_s "$p"; fig ratio "$r"
  [[ $device == cuda ]] || return 0
  local util mean max samples
  util=$(helper gpu-util "$(ls "$work"/tta/mgtrain-runs/*/resources.jsonl | head -n 1)") ||
    fail "no GPU utilisation from the launcher's sampler"
  read -r mean max samples <<<"$util"
  fig gpu_util_mean "$mean"; fig gpu_util_max "$max"; fig gpu_util_samples "$samples"
}

step_step_bench() {
  # Each row is recorded as it arrives, so a run cut short by its timeout keeps the rows it finished.
  local model precision m p r mc d rc2 line last=""
  while IFS= read -r line; do
    echo "$line"
    last=$line
    read -r model precision m p r mc d rc2 <<<"$line"
    [[ $m =~ ^[0-9.]+$ ]] || continue
    fig "$model.$precision" "mgtrain $m ms, python $p ms (${r}); mgtrain+nccl $mc ms, python ddp $d ms (${rc2})"
    fig "$model.$precision.ratio" "${r%x}"
    fig "$model.$precision.ddp_ratio" "${rc2%x}"
  done < <(MGTRAIN=$bin/mgtrain PYTHON=$PYTHON STEPS=100 PRECISIONS="${PRECISIONS:-fp32 bf16}" "$root/scripts/bench/gpu_step.sh" \
             2>"$work/bench.err"; echo "exit $?")
  tail -n 20 "$work/bench.err"
  [[ $last == "exit 0" ]] || fail "gpu_step.sh failed: ${last:-no exit status}"
  grep -q '\.ratio' "$steps_dir/$step.fig" || fail "no result rows"
}

if [[ ${1:-} == --run-step ]]; then
  step=$2
  case $step in
    train-*) IFS=- read -r _ model precision <<<"$step"; step_train "$model" "$precision" ;;
    *) "step_${step//-/_}" ;;
  esac
  exit 0
fi

# ---------------------------------------------------------------------------------------------------------------------
# The runner.

dry=false only="" out_dir=${OUT:-$PWD/gpu-check}
while (($#)); do
  case $1 in
    --dry-run) dry=true ;;
    --only) [[ $# -ge 2 ]] || die "--only needs a list of steps"; only=,$2,; shift ;;
    --out) [[ $# -ge 2 ]] || die "--out needs a folder"; out_dir=$2; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$self" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[[ -f $root/bundle-info && -x $bin/mgtrain ]] ||
  die "$root is not a bundle (no bundle-info or bin/mgtrain): make one with scripts/device/pack.sh and run BUNDLE/check.sh"
export PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null || die "no Python '$PYTHON' (PYTHON= names the one with the device's torch)"
budget=${CHECK_BUDGET_S:-480}
[[ $budget =~ ^[1-9][0-9]*$ ]] || die "CHECK_BUDGET_S=$budget: expected a positive number of seconds"
mkdir -p "$out_dir" || die "cannot create $out_dir"
out_dir=$(cd "$out_dir" && pwd)
export work
work=$(mktemp -d "${TMPDIR:-/tmp}/mgtrain-gpu-check.XXXXXX") || die "cannot create a scratch folder"
trap 'rm -rf "$work"' EXIT
export steps_dir=$work/steps root bin tests
mkdir -p "$steps_dir"
log=$out_dir/gpu-check.log
: >"$log"

# The torch whose libraries the binaries load: the Python's (torch/lib and the nvidia-* wheels' lib folders).
export torch_version="" torch_cuda=""
facts=$("$PYTHON" -c 'import glob, os, torch
d = os.path.dirname(torch.__file__)
print(torch.__version__); print(torch.version.cuda or "")
print(":".join([os.path.join(d, "lib")] + sorted(glob.glob(os.path.join(d, "..", "nvidia", "*", "lib")))))' 2>>"$log")
if [[ -n $facts ]]; then
  { read -r torch_version; read -r torch_cuda; read -r torch_libs; } <<<"$facts"
  export LD_LIBRARY_PATH=$(readlink -f ${torch_libs//:/ } | sort -u | paste -sd:)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export device=cuda
# A dry run trains on the CPU, in CI beside other tests: LibTorch's OpenMP threads spin at every barrier, and two of them
# on a loaded 2-core machine made a 1 s run take over 100 s (crash-resume timed out). One thread is 25x faster there.
$dry && { device=cpu; export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}; }
has_gpu=false
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && has_gpu=true

{
  printf 'date\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  printf 'dry_run\t%s\n' "$dry"
  printf 'budget_s\t%s\n' "$budget"
  sed -n 's/^\([a-z_]*\)=/bundle_\1\t/p' "$root/bundle-info"
  printf 'python\t%s\n' "$PYTHON"
  printf 'python_torch\t%s\n' "${torch_version:-none}"
  $has_gpu && printf 'gpu\t%s\n' "$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null)"
} >"$steps_dir/meta"

# name, kind (both: runs on the CPU in a dry run; gpu: skipped in a dry run), timeout in seconds; in priority order.
steps=(
  "bundle both 60" "nvidia-smi gpu 30" "probe both 60" "env both 30" "gpu-tests both 150"
  "train-cnn-fp32 both 60" "train-cnn-bf16 both 60" "train-cnn-fp16 gpu 60"
  "train-gpt-fp32 both 60" "train-gpt-bf16 both 60" "train-gpt-fp16 gpu 60"
  "nccl-world-1 both 60" "shared-gpu gpu 90" "crash-resume both 120" "gpu-ids-auto both 60" "memory-fraction gpu 60"
  "time-to-accuracy both 150" "step-bench gpu 300"
)
deadline=$((SECONDS + budget))
names=() failed=0
echo "check.sh: bundle $root, $($dry && echo "dry run (no GPU needed)" || echo "on the GPU"), budget ${budget} s; log: $log"
for entry in "${steps[@]}"; do
  read -r name kind limit <<<"$entry"
  [[ -z $only || $only == *",$name,"* ]] || continue
  names+=("$name")
  : >"$steps_dir/$name.fig"
  left=$((deadline - SECONDS))
  status="" note=""
  if [[ $kind == gpu ]] && $dry; then
    status=skip note="needs a GPU (dry run)"
  elif [[ $kind == gpu ]] && ! $has_gpu; then
    status=fail note="needs a GPU and nvidia-smi -L lists none (use --dry-run on a machine without one)"
  elif ((left < 15)); then
    status=skip note="the budget of $budget s is spent (CHECK_BUDGET_S)"
  fi
  start=$EPOCHREALTIME
  if [[ -z $status ]]; then
    ((limit < left - 5)) || limit=$((left - 5))
    printf '\n=== %s (timeout %s s) ===\n' "$name" "$limit" >>"$log"
    timeout -k 10 "$limit" bash "$self" --run-step "$name" >>"$log" 2>&1
    rc=$?
    case $rc in
      0) status=pass ;;
      77) status=skip ;;
      124 | 137) status=fail note="timed out after $limit s" ;;
      *) status=fail ;;
    esac
  fi
  [[ -z $note ]] || printf 'note\t%s\n' "$note" >>"$steps_dir/$name.fig"
  echo "$status" >"$steps_dir/$name.status"
  awk -v a="$EPOCHREALTIME" -v b="$start" 'BEGIN { printf "%.1f\n", a - b }' >"$steps_dir/$name.seconds"
  [[ $status != fail ]] || failed=$((failed + 1))
  printf 'check.sh: %-17s %-4s %6s s  %s\n' "$name" "$status" "$(cat "$steps_dir/$name.seconds")" \
    "$(sed -n 's/^note\t//p' "$steps_dir/$name.fig" | tail -n 1)" | tee -a "$log"
done
((${#names[@]} > 0)) || die "--only named no step of: $(printf '%s ' "${steps[@]%% *}")"
totals=$(helper assemble "$steps_dir" "$out_dir/gpu-check.json" "${names[@]}") || { echo "check.sh: could not write gpu-check.json" >&2; exit 1; }
echo "check.sh: $totals; $out_dir/gpu-check.json"
((failed == 0)) || exit 1
exit 0
