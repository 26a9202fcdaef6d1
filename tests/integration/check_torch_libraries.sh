#!/usr/bin/env bash
# Checks that a worker binary of the torch2 flavour loads every LibTorch library (libc10*, libtorch*) from the given
# torch directory (the pip wheel's), none from elsewhere (Debian's libtorch 1.13 in /usr/lib), and finds them all; and
# that libstdc++ comes before every LibTorch library among its NEEDED entries (third_party/mgtrain_torch.cmake: some
# LibTorch builds export a broken copy of std::filesystem that would otherwise win).
# Usage: check_torch_libraries.sh BINARY TORCH_ROOT      (exit 0: fine; 1: a library from elsewhere or missing)
set -euo pipefail
binary=$1
root=$(cd "$2" && pwd -P)
out=$(ldd "$binary")
bad=0
found=0
while read -r name _ path _; do
  case "$name" in
    libc10*.so*|libtorch*.so*) ;;
    *) continue ;;
  esac
  found=$((found + 1))
  real=$(readlink -f "$path" 2>/dev/null || echo "$path")
  if [[ "$path" == "not" || "$real" != "$root"/* ]]; then
    echo "check_torch_libraries: $name -> $path: not from $root" >&2
    bad=1
  fi
done <<<"$out"
if [[ $found -eq 0 ]]; then
  echo "check_torch_libraries: ldd $binary lists no LibTorch library" >&2
  exit 1
fi
if grep -q "not found" <<<"$out"; then
  grep "not found" <<<"$out" >&2
  bad=1
fi
needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
first_torch=$(grep -n -m1 -E '^lib(c10|torch)' <<<"$needed" | cut -d: -f1)
stdcxx=$(grep -n -m1 '^libstdc++' <<<"$needed" | cut -d: -f1)
if [[ -z $stdcxx || -z $first_torch || $stdcxx -gt $first_torch ]]; then
  echo "check_torch_libraries: $binary needs $(paste -sd' ' <<<"$needed"): libstdc++ must come before the first" \
       "LibTorch library (a LibTorch exporting std::filesystem would win its calls)" >&2
  bad=1
fi
if [[ $bad -ne 0 ]]; then exit 1; fi
echo "check_torch_libraries: all $found LibTorch libraries of $binary come from $root, after libstdc++"
