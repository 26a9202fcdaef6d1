#!/usr/bin/env bash
# ctest device_check_dry_run (the LibTorch 2.x flavour): packs this build into a GPU bundle with scripts/device/pack.sh
# and runs the bundle's check.sh --dry-run with the build's own torch standing in for a GPU machine's. Every step that
# can run on the CPU must pass and every GPU-only step must be skipped, with the figures that prove the step did its
# work; then a bundle with a changed file, and a Python whose torch is another version, must each fail the bundle step
# with a message naming the cause.
#   device_check_dry_run.sh BUILD_DIR TORCH_ROOT
set -uo pipefail
build=$(cd "$1" && pwd)
torch_root=$2
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
python=$(readlink -f "$torch_root/../../../..")/bin/python
bundle=$build/device-bundle-test
out=$build/device-check-dry
fail() { echo "device_check_dry_run: FAIL: $*" >&2; exit 1; }
[[ -x $python ]] || fail "no Python beside $torch_root"

"$source_dir/scripts/device/pack.sh" --from "$build" --out "$bundle" || fail "pack.sh failed (above)"
rm -rf "$out"
PYTHON=$python "$bundle/check.sh" --dry-run --out "$out"
rc=$?
[[ -f $out/gpu-check.json ]] || fail "no gpu-check.json (exit $rc)"
((rc == 0)) || { cat "$out/gpu-check.log"; fail "check.sh --dry-run exited $rc"; }

"$python" - "$out/gpu-check.json" <<'PY' || fail "gpu-check.json is not what the dry run must give (above)"
import json, sys
doc = json.load(open(sys.argv[1]))
steps = {s["name"]: s for s in doc["steps"]}
gpu_only = {"nvidia-smi", "train-cnn-fp16", "train-gpt-fp16", "shared-gpu", "memory-fraction", "step-bench"}
problems = []
for name, s in steps.items():
    want = "skip" if name in gpu_only else "pass"
    if s["status"] != want:
        problems.append("%s: %s, want %s (%s)" % (name, s["status"], want, s["figures"].get("note", "")))
    if not isinstance(s["seconds"], (int, float)):
        problems.append("%s: seconds %r is not a number" % (name, s["seconds"]))
def fig(step, key):
    return steps.get(step, {}).get("figures", {}).get(key)
expect = [
    (len(steps) == 18, "18 steps, got %d" % len(steps)),
    (doc["check"]["dry_run"] is True, "check.dry_run is not true"),
    (doc["totals"] == {"pass": 12, "fail": 0, "skip": 6}, "totals %s" % doc["totals"]),
    (fig("probe", "built_with_cuda") is True, "probe: built_with_cuda is not true"),
    (str(fig("crash-resume", "identical")).endswith("bit-identical (6 model, 6 optimizer)"),
     "crash-resume: %r" % fig("crash-resume", "identical")),
    ("the snapshot in memory" in str(fig("crash-resume", "resumed")),
     "crash-resume: not resumed from the snapshot in memory: %r" % fig("crash-resume", "resumed")),
    (all(fig(t, "final_loss") < fig(t, "first_loss") for t in ("train-cnn-fp32", "train-cnn-bf16", "train-gpt-fp32")),
     "a training step's loss did not fall"),
    (fig("nccl-world-1", "backend", ) in ("gloo", "gloo+shm"), "nccl-world-1: backend %r" % fig("nccl-world-1", "backend")),
    ("All tests passed" in str(fig("gpu-tests", "result")), "gpu-tests: %r" % fig("gpu-tests", "result")),
    (isinstance(fig("time-to-accuracy", "ratio"), float), "time-to-accuracy: no ratio"),
    (fig("step-bench", "note") == "needs a GPU (dry run)", "step-bench: %r" % fig("step-bench", "note")),
]
problems += [message for ok, message in expect if not ok]
for p in problems:
    print("  " + p)
sys.exit(1 if problems else 0)
PY

# A changed file: the bundle step fails naming the file.
echo "# changed" >>"$bundle/configs/tokens_gpt.yaml"
PYTHON=$python "$bundle/check.sh" --dry-run --only bundle --out "$out/changed" >/dev/null
rc=$?
((rc == 1)) || fail "a changed bundle: exit $rc, want 1"
grep -q 'configs/tokens_gpt.yaml: FAILED' "$out/changed/gpu-check.log" || fail "a changed bundle: the log names no changed file"
grep -q '"status": "fail"' "$out/changed/gpu-check.json" || fail "a changed bundle: the bundle step did not fail"

# A Python whose torch is another version (Debian's 1.13, when installed): refused for the C++ ABI.
other=/usr/bin/python3
if "$other" -c 'import torch' 2>/dev/null; then
  "$source_dir/scripts/device/pack.sh" --from "$build" --out "$bundle" >/dev/null 2>&1 || fail "pack.sh failed the second time"
  PYTHON=$other "$bundle/check.sh" --dry-run --only bundle --out "$out/other" >/dev/null
  rc=$?
  ((rc == 1)) || fail "another torch: exit $rc, want 1"
  grep -q "C++ ABI changes" "$out/other/gpu-check.json" || fail "another torch: no message about the torch version"
else
  echo "device_check_dry_run: the other-torch case skipped: $other has no torch"
fi
rm -rf "$bundle"
echo "device_check_dry_run: passed (gpu-check.json of the dry run: $out/gpu-check.json)"
