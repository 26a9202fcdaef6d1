#!/usr/bin/env bash
# Builds one layering probe (tests/layering/CMakeLists.txt) and checks the outcome.
# Usage: probe.sh CMAKE BUILD_DIR TARGET HEADER pass|fail
# fail: the build must fail because HEADER cannot be found (not for any other reason); pass: it must build.
set -u
cmake=$1 build=$2 target=$3 header=$4 expect=$5
output=$("$cmake" --build "$build" --target "$target" 2>&1)
status=$?
if [[ $expect == pass ]]; then
  if [[ $status -ne 0 ]]; then echo "$output"; echo "FAIL: $target should build (it may include $header)"; exit 1; fi
  echo "ok: $target builds: it may include $header"
  exit 0
fi
if [[ $status -eq 0 ]]; then echo "FAIL: $target built, but it must not see $header"; exit 1; fi
if ! grep -q "$header: No such file or directory" <<<"$output"; then
  echo "$output"; echo "FAIL: $target failed to build, but not because $header is out of its reach"; exit 1
fi
echo "ok: $target cannot include $header:"
grep "$header: No such file or directory" <<<"$output" | head -1
