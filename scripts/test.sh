#!/usr/bin/env bash
# The whole test suite from nothing: install what is missing (test tools included), then three stages:
#   1. the default flavour (Debian's LibTorch 1.13, CPU) in build/: everything built in Release, every test;
#   2. the sanitizers: the torch-free libraries, the launcher and their unit tests under ASan+UBSan in build-asan/
#      (scripts/test-sanitizers.sh);
#   3. the LibTorch 2.x flavour (PyPI's torch wheel, CUDA build, in a cached venv outside the clone:
#      scripts/torch2-env.sh) in build-torch2/: the worker and every test that runs torch code (the launcher is
#      torch-free and was tested in stage 1), and the GPU bundle's check.sh --dry-run (device_check_dry_run).
# Re-runs are incremental. Exit code 0 only when every stage passed.
# Usage: scripts/test.sh [extra ctest arguments for stage 1, e.g. -R launch]
#   MGTRAIN_TEST_STAGES="default sanitizers torch2" (the default) chooses stages.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)
stages=${MGTRAIN_TEST_STAGES:-default sanitizers torch2}
scripts/install-deps.sh --test
status=0
report=()
stage_done() { report+=("$1: $2 in $(( $(date +%s) - $3 )) s"); }

if [[ " $stages " == *" default "* ]]; then
  t=$(date +%s)
  scripts/build.sh
  build=${MGTRAIN_BUILD_DIR:-build}
  result=passed
  (cd "$build" && ctest -j "$(nproc)" --output-on-failure --timeout 300 "$@") || { result=FAILED; status=1; }
  stage_done "default flavour (LibTorch 1.13)" "$result" "$t"
fi

if [[ " $stages " == *" sanitizers "* ]]; then
  t=$(date +%s)
  result=passed
  scripts/test-sanitizers.sh || { result=FAILED; status=1; }
  stage_done "sanitizers (ASan+UBSan)" "$result" "$t"
fi

if [[ " $stages " == *" torch2 "* ]]; then
  t=$(date +%s)
  result=passed
  # The torch tests of the LibTorch 2.x flavour (test_worker runs its worker under the venv's torchrun 2.x).
  torch_tests='^(test_train_|test_training_reporter|test_ddp|test_sync_batch_norm|test_grad_scaler|test_mixed_precision|test_gpu|test_export|test_worker|test_checkpoint_resume|test_checkpoint_processes|test_run_metrics|test_binaries|torch_libraries_from_wheel|device_check_dry_run)'
  if scripts/build-torch2.sh; then
    (cd "${MGTRAIN_TORCH2_BUILD_DIR:-build-torch2}" &&
       ctest -j "$(nproc)" --output-on-failure --timeout 300 -R "$torch_tests") ||
      { result=FAILED; status=1; }
  else
    result="FAILED (build)"; status=1
  fi
  stage_done "LibTorch $(cat scripts/torch2-version) flavour" "$result" "$t"
fi

cd "$root"
for line in "${report[@]}"; do echo "scripts/test.sh: $line"; done
echo "scripts/test.sh: finished in $(( $(date +%s) - start )) s"
exit $status
