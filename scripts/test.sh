#!/usr/bin/env bash
# The whole test suite from nothing: install what is missing (test tools included), then three stages:
#   main:       the README's flavour, LibTorch 2.x with CUDA from PyPI's torch wheel (in a cached venv outside the
#               clone: scripts/torch2-env.sh), in build/: everything built in Release, every test, the GPU bundle's
#               check.sh --dry-run (device_check_dry_run) included;
#   sanitizers: the torch-free libraries, the launcher and their unit tests under ASan+UBSan in build-asan/
#               (scripts/test-sanitizers.sh);
#   debian:     the zero-download fallback flavour, Debian's LibTorch 1.13 (CPU), in build-debian/: the worker and
#               the tests labelled `torch` (ctest -L torch: the train libraries, the worker, export, the OpenBLAS core
#               choice that only this flavour needs; the launcher is torch-free and was tested in the main stage),
#               building only what they run (the target mgtrain_torch_tests).
# Every stage builds with MGTRAIN_WERROR=ON: a compiler warning fails it. Tests carry ctest labels (unit, integration,
# torch, gpu, slow; tests/CMakeLists.txt says which): stages choose tests by label, never by name.
# Re-runs are incremental. Exit code 0 only when every stage passed.
# Usage: scripts/test.sh [extra ctest arguments for the main stage, e.g. -R launch]
#   MGTRAIN_TEST_STAGES="main sanitizers debian" (the default) chooses stages.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)
stages=${MGTRAIN_TEST_STAGES:-main sanitizers debian}
for stage in $stages; do
  [[ $stage =~ ^(main|sanitizers|debian)$ ]] ||
    { echo "test.sh: MGTRAIN_TEST_STAGES: unknown stage '$stage' (the stages: main sanitizers debian)" >&2; exit 2; }
done
scripts/install-deps.sh --test
source scripts/compiler-cache.sh  # ccache for every build below, and for the projects tests configure
# Warnings are errors in every stage (build.sh passes MGTRAIN_CMAKE_ARGS when it configures).
export MGTRAIN_CMAKE_ARGS="-DMGTRAIN_WERROR=ON ${MGTRAIN_CMAKE_ARGS:-}"
status=0
report=()
built=0  # when the current stage's build ended (0: it has none of its own)
stage_done() {
  local now split=""
  now=$(date +%s)
  ((built > 0)) && split=" (build $((built - $3)) s, tests $((now - built)) s)"
  report+=("$1: $2 in $((now - $3)) s$split")
  built=0
}
# The slowest tests of a ctest log (its "N/M Test #K: NAME ....   Passed   12.34 sec" lines).
slowest_tests() {
  [[ -f $1 ]] || return 0
  echo "scripts/test.sh: the 20 slowest tests of the main stage (seconds):"
  sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: (.*[^ .]) \.+ *(\*\*\*)?[A-Za-z ]+ +([0-9.]+) sec$/\3\t\1/p' "$1" |
    sort -t $'\t' -k1,1 -rn | awk -F '\t' 'NR <= 20 { printf "scripts/test.sh: %8.1f  %s\n", $1, $2 }'
}
# Every test a ctest log says failed, with the last 40 lines of what it printed (ctest --output-on-failure puts that
# after the test's result line), so that the end of the suite's output names what failed and why.
failed_tests() {
  [[ -f $2 ]] || return 0
  awk -v stage="$1" '
    function flush() { if (name != "") { printf "scripts/test.sh: FAILED in the %s stage: %s\n", stage, name
                         for (i = (n > 40 ? n - 40 : 0); i < n; i++) print "    | " out[i] }
                       name = ""; n = 0 }
    /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: / { flush()
      if ($0 !~ / Passed +[0-9.]+ sec$/) { name = $0; sub(/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: /, "", name) }
      next }
    /^ +Start +[0-9]+: / || /^[0-9]+% tests passed/ || /^The following tests/ { flush(); next }
    name != "" { out[n++] = $0 }
    END { flush() }' "$2"
}

if [[ " $stages " == *" main "* ]]; then
  t=$(date +%s)
  result=passed
  if MGTRAIN_FLAVOUR=torch2 scripts/build.sh; then
    built=$(date +%s)
    (cd "${MGTRAIN_BUILD_DIR:-build}" && mkdir -p Testing &&
      ctest -j "$(nproc)" --output-on-failure --timeout 300 "$@" | tee Testing/main-stage.log) ||
      { result=FAILED; status=1; }
  else
    result="FAILED (build)"; status=1
  fi
  stage_done "main flavour (LibTorch $(cat scripts/torch2-version))" "$result" "$t"
fi

if [[ " $stages " == *" sanitizers "* ]]; then
  t=$(date +%s)
  result=passed
  scripts/test-sanitizers.sh || { result=FAILED; status=1; }
  stage_done "sanitizers (ASan+UBSan)" "$result" "$t"
fi

if [[ " $stages " == *" debian "* ]]; then
  t=$(date +%s)
  result=passed
  debian_build=${MGTRAIN_DEBIAN_BUILD_DIR:-build-debian}
  # build.sh configures this flavour only once: turn -Werror on in a folder configured before.
  if [[ -f $debian_build/build.ninja ]]; then cmake -S . -B "$debian_build" -DMGTRAIN_WERROR=ON >/dev/null; fi
  # The torch tests of the Debian flavour (test_worker runs its worker under Debian's torchrun 1.13).
  # Only what those tests run: the launcher, the worker and the binaries with a torch test (not the torch-free unit
  # tests, fuzzers and tools the main stage built and ran).
  if MGTRAIN_FLAVOUR=debian MGTRAIN_BUILD_DIR=$debian_build scripts/build.sh mgtrain mgtrain-worker mgtrain_torch_tests; then
    built=$(date +%s)
    (cd "$debian_build" && mkdir -p Testing &&
      ctest -j "$(nproc)" --output-on-failure --no-tests=error --timeout 300 -L torch | tee Testing/debian-stage.log) ||
      { result=FAILED; status=1; }
  else
    result="FAILED (build)"; status=1
  fi
  stage_done "debian flavour (LibTorch 1.13)" "$result" "$t"
fi

cd "$root"
if [[ " $stages " == *" main "* ]]; then slowest_tests "${MGTRAIN_BUILD_DIR:-build}/Testing/main-stage.log"; fi
if ((status != 0)); then
  [[ " $stages " == *" main "* ]] && failed_tests main "${MGTRAIN_BUILD_DIR:-build}/Testing/main-stage.log"
  [[ " $stages " == *" sanitizers "* ]] && failed_tests sanitizers "${MGTRAIN_ASAN_BUILD_DIR:-build-asan}/Testing/sanitizers-stage.log"
  [[ " $stages " == *" debian "* ]] && failed_tests debian "${debian_build:-build-debian}/Testing/debian-stage.log"
fi
for line in "${report[@]}"; do echo "scripts/test.sh: $line"; done
echo "scripts/test.sh: finished in $(( $(date +%s) - start )) s"
exit $status
