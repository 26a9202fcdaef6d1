#!/usr/bin/env bash
# Packs the GPU check into one self-contained folder to carry to a GPU machine that has no network, no compiler and
# none of Debian's libraries, only an NVIDIA driver and a Python with torch (docs/gpu.md, "Checking a GPU machine
# without network"). Then, there: BUNDLE/check.sh (PYTHON= that Python when it is not python3).
#   scripts/device/pack.sh                    build the CUDA flavour against the LibTorch of the device's torch
#                                             (the version pinned in scripts/device/torch-version; PyPI's wheel in its
#                                             own cached venv, as scripts/torch2-env.sh makes) into build-device/, and
#                                             pack it into device-bundle/
#   scripts/device/pack.sh --from BUILD_DIR   pack an existing build of the LibTorch 2.x flavour instead (CI packs
#                                             the main build, build/, to run check.sh --dry-run)
#   --out DIR                                 the bundle folder (default device-bundle/; replaced)
# The bundle: bin/ (mgtrain, mgtrain-worker), tests/ (test_gpu), lib/ (the libraries they need beyond the C runtime,
# the driver and torch's own, which come from the machine's torch), configs/, data/ (Fashion-MNIST, and docs as a
# text corpus for the GPT), scripts/ (check.sh, the benchmarks), bundle-info (torch version, commit) and
# bundle.sha256. Binaries are stripped and find lib/ through RUNPATH $ORIGIN/../lib; torch's libraries come from
# LD_LIBRARY_PATH, which check.sh sets from the Python's torch. Verified here against the build's own torch:
# check.sh --dry-run --only bundle,probe,env. Prints the bundle's size and what the device tool would carry.
# Needs patchelf (scripts/install-deps.sh installs it) and Fashion-MNIST (dataset-fashion-mnist, or DATA=DIR).
set -euo pipefail
cd "$(dirname "$0")/../.."
say() { echo "pack.sh: $*" >&2; }
die() { say "$*"; exit 2; }

from="" out=device-bundle
while (($#)); do
  case $1 in
    --from) [[ $# -ge 2 ]] || die "--from needs a build folder"; from=$2; shift ;;
    --out) [[ $# -ge 2 ]] || die "--out needs a folder"; out=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
command -v patchelf >/dev/null || die "needs patchelf to point the binaries at the bundle's lib/ (apt-get install patchelf)"
data=${DATA:-/usr/share/datasets/fashion-mnist}
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [[ -f $data/$f.gz ]] || die "no $data/$f.gz: apt-get install dataset-fashion-mnist (or DATA= a folder with the .gz files)"
done

if [[ -z $from ]]; then
  from=build-device
  MGTRAIN_TORCH2_VERSION_FILE=scripts/device/torch-version MGTRAIN_TORCH2_BUILD_DIR=$from \
    scripts/build-torch2.sh mgtrain mgtrain-worker test_gpu
fi
[[ -f $from/CMakeCache.txt ]] || die "$from is not a build folder (no CMakeCache.txt)"
torch_root=$(sed -n 's/^MGTRAIN_TORCH_ROOT:[A-Z]*=//p' "$from/CMakeCache.txt")
[[ -n $torch_root && -f $torch_root/version.py ]] ||
  die "$from is not a build of the LibTorch 2.x flavour from a pip torch (no MGTRAIN_TORCH_ROOT with a version.py)"
torch_version=$(sed -nE "s/^__version__ = '([^'+]*).*/\1/p" "$torch_root/version.py")
torch_cuda=$(sed -nE "s/^cuda.*= '([^']*)'.*/\1/p" "$torch_root/version.py")
[[ -n $torch_version && -n $torch_cuda ]] || die "cannot read torch's version and CUDA from $torch_root/version.py"
binaries=(bin/mgtrain bin/mgtrain-worker tests/test_gpu)
for b in "${binaries[@]}"; do
  [[ -x $from/$b ]] || die "$from/$b is missing: build it (scripts/build-torch2.sh mgtrain mgtrain-worker test_gpu)"
done
say "packing $from (LibTorch $torch_version, CUDA $torch_cuda) into $out"

rm -rf "$out"
mkdir -p "$out"/{bin,tests,lib,data/fashion-mnist,scripts/device,scripts/bench}
for b in "${binaries[@]}"; do
  cp "$from/$b" "$out/$b"
  strip --strip-unneeded "$out/$b"
  patchelf --set-rpath '$ORIGIN/../lib' "$out/$b"
done

# Libraries: what ldd resolves with torch's folders on LD_LIBRARY_PATH (as check.sh sets them on the device), less
# torch's own (the machine's), the C and C++ runtimes and the driver (every such machine has newer ones).
torch_libs=$(readlink -f "$torch_root/lib" "$torch_root"/../nvidia/*/lib | sort -u | paste -sd:)
base=$(cat scripts/device/machine-libraries)  # the C and C++ runtimes and the driver, as check.sh reads them too
for b in "${binaries[@]}"; do
  while read -r lib arrow path _; do
    [[ $arrow == "=>" ]] || continue
    [[ $path != "not" ]] || die "$out/$b: $lib not found here either"
    [[ ! $lib =~ $base ]] || continue
    case ":$torch_libs:" in *":$(dirname "$(readlink -f "$path")"):"*) continue ;; esac
    [[ -f $out/lib/$lib ]] || cp -L "$path" "$out/lib/$lib"
  done < <(LD_LIBRARY_PATH=$torch_libs ldd "$out/$b")
done

cp -r configs "$out/configs"
cp "$data"/*-idx[13]-ubyte.gz "$out/data/fashion-mnist/"
cat README.md docs/*.md >"$out/data/text.txt"  # a char-level corpus for the GPT step
cp scripts/device/check.sh scripts/device/check_helpers.py scripts/device/machine-libraries "$out/scripts/device/"
cp scripts/bench/gpu_step.sh scripts/bench/gpu_step_reference.py scripts/bench/time_to_accuracy.sh \
   scripts/bench/fmnist_reference.py "$out/scripts/bench/"
printf '#!/usr/bin/env bash\n# The GPU check of this bundle: scripts/device/check.sh --help\nexec "$(dirname "$0")/scripts/device/check.sh" "$@"\n' \
  >"$out/check.sh"
chmod +x "$out/check.sh"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || commit+="+changes"
{
  echo "torch_version=$torch_version"
  echo "torch_cuda=$torch_cuda"
  echo "commit=$commit"
  echo "packed=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "libraries=$(ls "$out/lib" | paste -sd' ')"
  # the newest C library the binaries need (Debian bookworm's is 2.36): an older machine cannot run them
  echo "glibc_required=$(objdump -T "$out"/bin/* "$out"/tests/* "$out"/lib/* | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)"
} >"$out/bundle-info"
(cd "$out" && find . -type f ! -name bundle.sha256 | LC_ALL=C sort | xargs sha256sum >bundle.sha256)

# Verify here, with the build's own torch standing in for the device's.
python=${PYTHON:-$(readlink -f "$torch_root/../../../..")/bin/python}
[[ -x $python ]] || die "no Python beside $torch_root to verify with: set PYTHON= the Python of that torch"
check_out=$(mktemp -d)
if ! PYTHON=$python "$out/check.sh" --dry-run --only bundle,probe,env --out "$check_out" >&2; then
  cat "$check_out/gpu-check.log" >&2
  rm -rf "$check_out"
  die "the bundle does not check out here (above)"
fi
rm -rf "$check_out"
size=$(du -sm "$out" | cut -f1)
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
say "bundle $out: $size MiB ($(wc -l <"$out/bundle.sha256") files; libraries carried: $(ls "$out/lib" | paste -sd' '))"
say "with the working tree ($((tree / 1048576)) MiB) the device tool carries $((size + tree / 1048576)) MiB of its 64"
say "run there: $out/check.sh   (PYTHON= the Python with torch $torch_version if not python3)"
