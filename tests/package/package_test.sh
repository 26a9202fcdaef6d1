#!/usr/bin/env bash
# The installed CMake package (lib/package.cmake), used the way a project outside the tree uses it: installs BUILD_DIR
# into a temporary prefix, checks the layout (worker-side libraries and headers in, launcher-only libraries out, no
# path into the build or source tree in the installed CMake files), configures and builds tests/package/consumer
# against the prefix with find_package(mgtrain), and runs the built worker: --help, LibTorch and fmt directly, 2 steps
# of training on synthetic data alone and as 2 ranks under the installed `mgtrain launch --worker`. Registered in tests/CMakeLists.txt (labels integration, torch, slow).
# Usage: package_test.sh BUILD_DIR WORK_DIR TORCH_DIR CXX_COMPILER [COMPILER_LAUNCHER]
set -euo pipefail
build=$(cd "$1" && pwd -P)
work=$2
torch_dir=$3
cxx=$4
launcher=${5:-}
source_dir=$(cd "$(dirname "$0")/../.." && pwd -P)
say() { echo "package_test: $*"; }
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
say "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log" >&2; fail "cmake --install"; }

# The layout: the package's files, the worker side's libraries and headers, no launcher-only library.
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
for file in "$libdir/cmake/mgtrain/mgtrainConfig.cmake" "$libdir/cmake/mgtrain/mgtrainConfigVersion.cmake" \
            "$libdir/cmake/mgtrain/mgtrainTargets.cmake" "$libdir/cmake/mgtrain/mgtrain_torch.cmake" \
            "$libdir/libmgtrain_train_loop.a" "$libdir/libmgtrain_util.a" "$libdir/libmgtrain_worker_io.a" \
            include/mgtrain/internal/util/build_info.hpp include/mgtrain/internal/train/loop/worker_main.hpp \
            include/mgtrain/internal/config/config_loader.hpp; do
  [[ -f "$prefix/$file" ]] || fail "$prefix/$file is not installed"
done
for library in supervise launch multinode slurm observe cli output elastic diagnose; do
  [[ ! -e "$prefix/$libdir/libmgtrain_$library.a" ]] || fail "the launcher-only library mgtrain_$library is installed"
  [[ ! -e "$prefix/include/mgtrain/internal/$library" ]] || fail "the launcher-only headers of $library are installed"
done
if grep -n -e "$build" -e "$source_dir" "$prefix/$libdir"/cmake/mgtrain/*.cmake; then
  fail "the installed CMake files name the build tree $build or the source tree $source_dir (above)"
fi

# The consumer: its own project, configured as a user would (the prefix, Torch's directory, this build's compiler).
consumer=$work/consumer
configure=(cmake -S "$source_dir/tests/package/consumer" -B "$consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release
           "-DCMAKE_PREFIX_PATH=$prefix" "-DTorch_DIR=$torch_dir" "-DCMAKE_CXX_COMPILER=$cxx")
if [[ -n "$launcher" ]]; then configure+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher"); fi
say "${configure[*]}"
"${configure[@]}" >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; fail "the consumer's configure"; }
say "cmake --build $consumer"
cmake --build "$consumer" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "the consumer's build"; }
worker=$consumer/my-worker

out=$("$worker" --help) || fail "my-worker --help exited with $?"
[[ "$out" == *"usage: mgtrain-worker"* ]] || fail "my-worker --help printed no usage: $out"
out=$("$worker" --torch-check) || fail "my-worker --torch-check exited with $?"
[[ "$out" == "consumer: torch "*" sum 6" ]] || fail "my-worker --torch-check printed: $out"
say "$out"

# Another LibTorch than the one mgtrain was built with is refused at configure time, naming both (a stand-in package
# of another version, laid out as a wheel's <root>/share/cmake/Torch).
other=$work/other-torch/share/cmake/Torch
mkdir -p "$other"
echo 'set(TORCH_LIBRARIES "")' >"$other/TorchConfig.cmake"
printf 'set(PACKAGE_VERSION 0.0.1)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' >"$other/TorchConfigVersion.cmake"
other_configure=(cmake -S "$source_dir/tests/package/consumer" -B "$work/consumer-other" -G Ninja
                 "-DCMAKE_PREFIX_PATH=$prefix" "-DTorch_DIR=$other" "-DCMAKE_CXX_COMPILER=$cxx")
if "${other_configure[@]}" >"$work/other.log" 2>&1; then
  cat "$work/other.log" >&2
  fail "the consumer configured against LibTorch 0.0.1 at $other"
fi
refusal=$(tr -s ' \n' ' ' <"$work/other.log" |
          grep -o 'mgtrain was built with LibTorch .* but this project found LibTorch [0-9.]*' || true)
[[ "$refusal" == *"found LibTorch 0.0.1" ]] || { cat "$work/other.log" >&2; fail "no clear refusal of LibTorch 0.0.1"; }
say "another LibTorch is refused: $refusal"

# Two steps of training, alone (world size 1), on synthetic data.
run=$work/run
mkdir -p "$run"
set +e
(cd "$run" && env -u MGTRAIN_CONFIG_FILE OMP_NUM_THREADS=1 "$worker" model.type=mlp model.hidden_sizes=16 \
   data.dataset=synthetic data.input_shape=1,8,8 data.synthetic_samples=256 train.max_steps=2 train.batch_size=16 \
   log.every_steps=1 "launch.log_dir=$run/logs" "checkpoint.dir=$run/checkpoints") >"$work/train.log" 2>&1
status=$?
set -e
cat "$work/train.log"
[[ $status -eq 0 ]] || fail "my-worker's training exited with $status (above)"
grep -q '"summary":' "$work/train.log" || fail "my-worker's training printed no summary (above)"
grep -q '"steps":2[,}]' "$work/train.log" || fail "my-worker's training did not run exactly 2 steps (above)"
# The same under the installed launcher: 2 ranks of my-worker (gloo), as a user runs a worker of their own.
set +e
(cd "$run" && OMP_NUM_THREADS=1 "$prefix/bin/mgtrain" launch --nproc 2 --worker "$worker" model.type=mlp \
   model.hidden_sizes=16 data.dataset=synthetic data.input_shape=1,8,8 data.synthetic_samples=256 train.max_steps=2 \
   train.batch_size=16 "launch.log_dir=$run/launch-logs" "checkpoint.dir=$run/launch-checkpoints") \
  >"$work/launch.log" 2>&1
status=$?
set -e
cat "$work/launch.log"
[[ $status -eq 0 ]] || fail "mgtrain launch --nproc 2 --worker my-worker exited with $status (above)"
grep -q '"world_size":2[,}]' "$work/launch.log" || fail "the launched run's summary does not say world_size 2 (above)"
say "PASS"
