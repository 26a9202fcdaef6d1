#!/usr/bin/env bash
# GPU step benchmark (docs/gpu.md): mgtrain on one GPU against the same model in Python eager PyTorch, for the CNN
# (configs/fashion_mnist_cnn.yaml on synthetic 1x28x28 data, batch 256) and the GPT (configs/tokens_gpt.yaml on a
# random token file, batch 32 x 128 tokens) and a compute-bound GPT (12 blocks, 12 heads, d_model 768, context 256,
# batch 16), each in fp32, bf16 and fp16. Like with like, both timing a step from fetching its batch to the end of
# the optimizer step, at the same torch version (PYTHON=<venv>/bin/python for torch 2.x; its torchrun beside it):
#   without communication: `mgtrain launch --nproc 1` (world 1) against plain Python;
#   with communication:    mgtrain with ddp.force_process_group (NCCL process group, reducer and step vote at world 1)
#                          against Python DDP over NCCL under torchrun --nproc_per_node 1.
# Reports the median step times and ratios.
# Needs a GPU, a CUDA build of mgtrain (scripts/build-cuda.sh) and python3 with CUDA torch; refuses otherwise.
# Usage: scripts/bench/gpu_step.sh     (MGTRAIN=build-cuda/bin/mgtrain STEPS=200 PRECISIONS="fp32 bf16 fp16"
#                                       MODELS="cnn gpt gpt-large" by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
mgtrain=${MGTRAIN:-build-cuda/bin/mgtrain}
steps=${STEPS:-200}
precisions=${PRECISIONS:-fp32 bf16 fp16}
models=${MODELS:-cnn gpt gpt-large}
python=${PYTHON:-python3}
torchrun=$(dirname "$(command -v "$python")")/torchrun
reference=scripts/bench/gpu_step_reference.py

refuse() { echo "gpu_step.sh: $*; nothing was measured" >&2; exit 2; }
[[ $steps =~ ^[1-9][0-9]*$ ]] && ((steps > 20)) || refuse "STEPS=$steps: expected a number of steps above 20 (10 are warm-up)"
for precision in $precisions; do
  [[ $precision =~ ^(fp32|bf16|fp16)$ ]] || refuse "PRECISIONS: '$precision' is not fp32, bf16 or fp16"
done
for model in $models; do
  [[ $model =~ ^(cnn|gpt|gpt-large)$ ]] || refuse "MODELS: '$model' is not cnn, gpt or gpt-large"
done
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU ' || refuse "no GPU visible (nvidia-smi -L lists none): this benchmark needs one"
[[ -x "$mgtrain" ]] || refuse "$mgtrain does not exist: build it with scripts/build-cuda.sh (or set MGTRAIN)"
worker="$(dirname "$mgtrain")/mgtrain-worker"
"$worker" --probe | grep -q '"built_with_cuda": true' || refuse "$worker is a CPU-only build: build with scripts/build-cuda.sh"
"$worker" --probe | grep -q '"cuda_available": true' || refuse "$worker sees no GPU (CUDA_VISIBLE_DEVICES? driver?)"
"$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
  refuse "$python has no CUDA torch for the reference"
[[ -x "$torchrun" ]] || refuse "no torchrun next to $python (it comes with torch)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tokens"
"$python" - "$work/tokens" <<'PY'
import json, sys
import numpy as np
rng = np.random.default_rng(0)
rng.integers(0, 512, size=2_000_000, dtype=np.uint16).tofile(sys.argv[1] + "/train.bin")
json.dump({"vocab_size": 512}, open(sys.argv[1] + "/meta.json", "w"))
PY

field() { grep -o '{"summary".*' | head -1 | sed -E "s/.*\"$1\": ?([0-9.e+-]+).*/\1/"; }

declare -A mgtrain_args=(
  [cnn]="configs/fashion_mnist_cnn.yaml data.dataset=synthetic data.input_shape=1,28,28 data.synthetic_samples=60000 train.batch_size=256"
  [gpt]="configs/tokens_gpt.yaml data.path=$work/tokens/train.bin train.batch_size=32"
  [gpt-large]="configs/tokens_gpt.yaml data.path=$work/tokens/train.bin train.batch_size=16 model.layers=12 model.heads=12 model.d_model=768 model.context_length=256"
)
declare -A python_args=([cnn]="--model cnn --batch 256" [gpt]="--model gpt --batch 32 --tokens $work/tokens/train.bin --vocab 512"
  [gpt-large]="--model gpt --batch 16 --tokens $work/tokens/train.bin --vocab 512 --layers 12 --heads 12 --d-model 768 --context 256")

printf '%-9s %-5s %12s %12s %9s %14s %14s %9s\n' model prec "mgtrain ms" "python ms" "ratio" "mgtrain+nccl" "python+ddp" "ratio"
for model in $models; do
  for precision in $precisions; do
    # shellcheck disable=SC2086
    m=$("$mgtrain" launch --nproc 1 --log-dir "$work/logs" ${mgtrain_args[$model]} train.precision=$precision \
        train.max_steps="$steps" train.eval_at_epoch_end=false checkpoint.dir= log.every_steps=100000 2>"$work/err" | field step_time_ms) ||
      { cat "$work/err" >&2; exit 1; }
    # shellcheck disable=SC2086
    mc=$("$mgtrain" launch --nproc 1 --log-dir "$work/logs" ${mgtrain_args[$model]} train.precision=$precision \
        ddp.force_process_group=true ddp.backend=nccl \
        train.max_steps="$steps" train.eval_at_epoch_end=false checkpoint.dir= log.every_steps=100000 2>"$work/err" | field step_time_ms) ||
      { cat "$work/err" >&2; exit 1; }
    # shellcheck disable=SC2086
    p=$("$python" "$reference" ${python_args[$model]} --precision "$precision" --steps "$steps" | field step_time_ms)
    # shellcheck disable=SC2086
    d=$("$torchrun" --standalone --nproc_per_node 1 "$reference" ${python_args[$model]} --precision "$precision" --steps "$steps" --ddp \
        2>/dev/null | field step_time_ms)
    printf '%-9s %-5s %12.3f %12.3f %8.2fx %14.3f %14.3f %8.2fx\n' "$model" "$precision" "$m" "$p" \
      "$(awk -v a="$p" -v b="$m" 'BEGIN { print a / b }')" "$mc" "$d" "$(awk -v a="$d" -v b="$mc" 'BEGIN { print a / b }')"
  done
done
echo "(ratios above 1: mgtrain's step is faster; device: $(nvidia-smi --query-gpu=name --format=csv,noheader -i 0))"
