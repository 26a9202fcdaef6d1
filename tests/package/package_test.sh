#!/usr/bin/env bash
# The installed CMake package (lib/package.cmake), used the way a project outside the tree uses it: installs BUILD_DIR
# into a temporary prefix, checks the layout (worker-side libraries and headers in, launcher-only libraries out, no
# path into the build or source tree in the installed CMake files), configures and builds examples/custom_model against
# the prefix with find_package(mgtrain) (another LibTorch is refused), then runs it as a user would: a typo in one of
# its own config keys is refused with file:line:column and a suggestion; 2 ranks train under the installed
# `mgtrain launch --worker` and the loss falls; a run whose rank is killed resumes from its checkpoint and ends
# bit-identical to an uninterrupted one; `mgtrain export` writes its weights. Registered in tests/CMakeLists.txt
# (labels integration, torch, slow).
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
            include/mgtrain/internal/config/config_loader.hpp include/mgtrain/trainer.hpp include/mgtrain/registry.hpp; do
  [[ -f "$prefix/$file" ]] || fail "$prefix/$file is not installed"
done
for library in supervise launch multinode slurm observe cli output elastic diagnose; do
  [[ ! -e "$prefix/$libdir/libmgtrain_$library.a" ]] || fail "the launcher-only library mgtrain_$library is installed"
  [[ ! -e "$prefix/include/mgtrain/internal/$library" ]] || fail "the launcher-only headers of $library are installed"
done
if grep -n -e "$build" -e "$source_dir" "$prefix/$libdir"/cmake/mgtrain/*.cmake; then
  fail "the installed CMake files name the build tree $build or the source tree $source_dir (above)"
fi

# Another LibTorch than the one mgtrain was built with is refused at configure time, naming both (a stand-in package
# of another version, laid out as a wheel's <root>/share/cmake/Torch).
other=$work/other-torch/share/cmake/Torch
mkdir -p "$other"
echo 'set(TORCH_LIBRARIES "")' >"$other/TorchConfig.cmake"
printf 'set(PACKAGE_VERSION 0.0.1)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' >"$other/TorchConfigVersion.cmake"
other_configure=(cmake -S "$source_dir/examples/custom_model" -B "$work/consumer-other" -G Ninja
                 "-DCMAKE_PREFIX_PATH=$prefix" "-DTorch_DIR=$other" "-DCMAKE_CXX_COMPILER=$cxx")
if "${other_configure[@]}" >"$work/other.log" 2>&1; then
  cat "$work/other.log" >&2
  fail "the consumer configured against LibTorch 0.0.1 at $other"
fi
refusal=$(tr -s ' \n' ' ' <"$work/other.log" |
          grep -o 'mgtrain was built with LibTorch .* but this project found LibTorch [0-9.]*' || true)
[[ "$refusal" == *"found LibTorch 0.0.1" ]] || { cat "$work/other.log" >&2; fail "no clear refusal of LibTorch 0.0.1"; }
say "another LibTorch is refused: $refusal"

# The example: its own project, configured as a user would (the prefix, Torch's directory, this build's compiler).
example=$work/example
configure=(cmake -S "$source_dir/examples/custom_model" -B "$example" -G Ninja -DCMAKE_BUILD_TYPE=Release
           "-DCMAKE_PREFIX_PATH=$prefix" "-DTorch_DIR=$torch_dir" "-DCMAKE_CXX_COMPILER=$cxx")
if [[ -n "$launcher" ]]; then configure+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher"); fi
say "${configure[*]}"
"${configure[@]}" >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; fail "the example's configure"; }
say "cmake --build $example"
cmake --build "$example" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "the example's build"; }
worker=$example/custom-worker
mgtrain=$prefix/bin/mgtrain
out=$("$worker" --describe-plugins) || fail "custom-worker --describe-plugins exited with $?"
[[ "$out" == *"name: residual_mlp"* && "$out" == *"name: spirals"* ]] || fail "--describe-plugins printed: $out"

# A typo in the model's own key: refused before any worker starts, with the place and a suggestion.
run=$work/run
mkdir -p "$run"
sed 's/^    blocks: 3$/    blcoks: 3/' "$source_dir/examples/custom_model/custom.yaml" >"$run/typo.yaml"
set +e
(cd "$run" && "$mgtrain" launch --nproc 2 --worker "$worker" typo.yaml) >"$work/typo.log" 2>&1
status=$?
set -e
cat "$work/typo.log"
[[ $status -eq 2 ]] || fail "a typo in model.options exited with $status, not 2"
grep -q 'typo.yaml:6:5: model.options.blcoks: unknown option of model.type residual_mlp (did you mean blocks?)' \
  "$work/typo.log" || fail "the typo's message lacks file:line:column or the suggestion (above)"

# 2 ranks, the example's config; checkpoints every 50 steps. `launch` runs it in $run with run id $1.
cp "$source_dir/examples/custom_model/custom.yaml" "$run/"
launch() {
  (cd "$run" && OMP_NUM_THREADS=1 "$mgtrain" launch --nproc 2 --worker "$worker" --run-id "$1" custom.yaml \
     train.epochs=2 checkpoint.every_steps=50 log.every_steps=25 "${@:2}")
}
set +e
launch whole >"$work/whole.log" 2>&1
status=$?
set -e
cat "$work/whole.log"
[[ $status -eq 0 ]] || fail "the 2-rank run exited with $status (above)"
grep -q '"world_size":2[,}]' "$work/whole.log" || fail "the run's summary does not say world_size 2 (above)"
first=$(grep -o 'step 25/[0-9]* epoch 1 loss [0-9.]*' "$work/whole.log" | awk '{print $NF}')
last=$(grep -o '"final_train_loss":[0-9.e-]*' "$work/whole.log" | cut -d: -f2)
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if b < a / 2 else 1)" \
  "$first" "$last" || fail "the loss did not fall by half: $first at step 25, $last at the end"
say "the loss fell from $first (step 25) to $last"

# The same run, its rank 1 stuck at step 120 (the trainer's test hook) and killed there: the launcher fails; the same
# run id again resumes from step 100 and ends where the uninterrupted run ended, bit for bit.
set +e
MGTRAIN_TEST_HANG_AT=1:120 launch killed >"$work/killed.log" 2>&1 &
launcher_pid=$!
set -e
for _ in $(seq 600); do
  [[ -f "$run/runs/killed/checkpoints/checkpoint-step000000100.safetensors" ]] && break
  sleep 0.1
done
sleep 1
pkill -KILL -x custom-worker || true  # the workers only (the launcher names the binary in its arguments)
set +e
wait "$launcher_pid"
status=$?
set -e
[[ $status -ne 0 ]] || { cat "$work/killed.log"; fail "the launcher whose worker was killed exited 0"; }
set +e
launch killed >"$work/resumed.log" 2>&1
status=$?
set -e
cat "$work/resumed.log"
[[ $status -eq 0 ]] || fail "the resumed run exited with $status (above)"
grep -q 'resum.*step 100' "$work/resumed.log" || fail "the second run did not resume from step 100 (above)"
summary() { grep -o '"final_train_loss":[^,]*,.*"eval":{[^}]*}' "$1" | sed 's/"wall_s[^,]*,//'; }
[[ "$(grep -o '"eval":{[^}]*}' "$work/whole.log")" == "$(grep -o '"eval":{[^}]*}' "$work/resumed.log")" ]] ||
  fail "the resumed run's evaluation differs from the uninterrupted run's"

# Exported as safetensors, the two runs' weights are the same bytes.
for name in whole killed; do
  checkpoint=$(ls "$run/runs/$name/checkpoints/"checkpoint-step*.safetensors | sort | tail -1)
  "$mgtrain" export "$checkpoint" -o "$work/$name.safetensors" >"$work/export-$name.log" 2>&1 ||
    { cat "$work/export-$name.log"; fail "mgtrain export $checkpoint"; }
done
python3 - "$work/whole.safetensors" "$work/killed.safetensors" <<'PY' || fail "the exported weights differ"
import json, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    return {k: body[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a.keys() == b.keys() and len(a) > 10, (sorted(a), sorted(b))
assert all(a[k] == b[k] for k in a), [k for k in a if a[k] != b[k]]
print(f"package_test: {len(a)} exported tensors bit-identical: " + ", ".join(sorted(a)[:3]) + ", ...")
PY
say "PASS"
