#!/usr/bin/env bash
# The wheels (scripts/wheel.sh, docs/install.md), used the way a torchrun user would: builds both from BUILD_DIR,
# checks them with `auditwheel show` (a manylinux tag; no library outside the wheel but the torch package's), makes a
# fresh venv that has the pinned torch (hard links to scripts/torch2-env.sh's, no download), installs the wheels there
# with pip as a user who is not root (nobody, HOME in a temporary folder; the current user when not root), and from a
# folder outside the clone runs: `mgtrain --version` (the binary itself in the venv's bin/, no Python shim); `python -m
# mgtrain`; `mgtrain launch --nproc 2` of a bench config for 20 steps (the worker found without launch.worker);
# `mgtrain torchrun --nproc-per-node 2` of a torch.distributed all_reduce; examples/custom_model configured with the
# prefix `python -m mgtrain_trainer` prints, built and trained for 20 steps. Then `pip uninstall` leaves no file of
# mgtrain behind. Registered in tests/CMakeLists.txt (labels integration, slow) for the pip-torch flavour.
# Usage: wheel_test.sh BUILD_DIR [CXX_COMPILER]          exit 0 passed, 1 failed, 77 skipped (the reason printed)
set -euo pipefail
build=$(cd "$1" && pwd -P)
cxx=${2:-c++}
source_dir=$(cd "$(dirname "$0")/../.." && pwd -P)
say() { echo "wheel_test: $*"; }
fail() { echo "wheel_test: FAIL: $*" >&2; exit 1; }
skip() { echo "wheel_test: SKIP: $*"; exit 77; }

work=$(mktemp -d /tmp/mgtrain-wheel-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")

say "scripts/wheel.sh --no-build --build-dir $build --out $work/dist"
"$source_dir/scripts/wheel.sh" --no-build --build-dir "$build" --out "$work/dist" >"$work/wheel.log" 2>&1 ||
  { cat "$work/wheel.log" >&2; fail "scripts/wheel.sh"; }
cat "$work/wheel.log"
launcher_wheel=$(ls "$work"/dist/mgtrain-"$version"-py3-none-manylinux_*_x86_64.whl)
trainer_wheel=$(ls "$work"/dist/mgtrain_trainer-"$version"-py3-none-manylinux_*_x86_64.whl)

# auditwheel's own verdict: the wheel's tag is the one it allows, and nothing is needed from outside the wheel but
# the manylinux libraries and (the trainer) the torch package's, found where the torch package has them.
tools=${MGTRAIN_WHEEL_TOOLS_VENV:-$HOME/.cache/mgtrain/wheel-tools}
torch_venv=$("$source_dir/scripts/torch2-env.sh")
torch_site=$(echo "$torch_venv"/lib/python3*/site-packages)
torch_dirs=$(find "$torch_site/torch/lib" "$torch_site/nvidia" -name 'lib*.so*' -printf '%h\n' | sort -u | paste -sd:)
for wheel in "$launcher_wheel" "$trainer_wheel"; do
  ldpaths=()
  [[ $wheel == "$trainer_wheel" ]] && ldpaths=(--ldpaths "$torch_dirs")
  "$tools/bin/auditwheel" show --json "${ldpaths[@]}" "$wheel" >"$work/show.json" ||
    fail "auditwheel show $wheel"
  "$tools/bin/python" - "$wheel" "$work/show.json" "$torch_site" <<'EOF' || fail "auditwheel show's verdict (above)"
import json, sys
wheel, show, torch_site = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
tag = wheel[:-len(".whl")].split("-")[-1]
allowed = {"libstdc++.so.6", "libgcc_s.so.1", "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
           "libz.so.1", "libexpat.so.1", "libX11.so.6", "libXext.so.6", "libXrender.so.1", "libutil.so.1"}
outside = {name: path for name, path in show["external_libs"].items()
           if name not in allowed and not (path or "").startswith(torch_site + "/")}
print(f"wheel_test: {wheel.rsplit('/', 1)[-1]}: auditwheel says {show['overall_tag']}; "
      f"{len(show['external_libs'])} libraries outside it, {len(outside)} not allowed {sorted(outside)}")
ok = not outside and show["overall_tag"] in ("linux_x86_64", tag) and show["sym_tag"] == tag
sys.exit(0 if ok else 1)
EOF
done

# A user that is not root: nobody (when we are root), with its own HOME; the venv's folders are its own.
if [[ $(id -u) -eq 0 ]]; then
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  user=nobody
else
  as_user=()
  user=$(id -un)
fi
venv=$work/venv
/usr/bin/python3 -m venv --without-pip "$venv"  # pip comes with the torch venv's files below
site=$(echo "$venv"/lib/python3*/site-packages)
[[ "$(basename "$(dirname "$site")")" == "$(basename "$(dirname "$torch_site")")" ]] ||
  skip "the torch venv ($torch_site) is for another Python than /usr/bin/python3"
# The pinned torch, its dependencies and pip, as hard links (no copy, no download): their files stay the torch venv
# owner's and read-only to the user; pip sees torch installed.
for entry in "$torch_site"/*; do
  cp -al "$entry" "$site/" 2>"$work/link.log" ||
    skip "cannot hard-link the torch venv ($torch_site) into $site: $(head -1 "$work/link.log")"
done
mkdir -p "$work/home" "$work/run"
chown "$user" "$venv" "$venv/bin" "$venv/lib" "$(dirname "$site")" "$site" "$work/home" "$work/run" "$work/dist"
cp -r "$source_dir/examples/custom_model" "$work/run/custom_model"
cat >"$work/run/allreduce.py" <<'EOF'
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: all_reduce gave {value.item():g}", flush=True)
dist.destroy_process_group()
EOF
chown -R "$user" "$work/run"
# Runs a command as the user, in $work/run, with the venv first on PATH and nothing of this shell's Python setup.
as() {
  (cd "$work/run" && env -i HOME="$work/home" PATH="$venv/bin:/usr/bin:/bin" OMP_NUM_THREADS=1 LANG=C.UTF-8 \
     "${as_user[@]}" "$@")
}
find "$venv" | sort >"$work/before.txt"

say "as $user: pip install --no-index --find-links dist mgtrain-trainer (it requires mgtrain==$version and torch)"
as python -m pip install --disable-pip-version-check --no-cache-dir --no-index --find-links "$work/dist" mgtrain-trainer \
  >"$work/pip.log" 2>&1 || { cat "$work/pip.log" >&2; fail "pip install as $user"; }
grep -q "Successfully installed mgtrain-$version mgtrain-trainer-$version" "$work/pip.log" ||
  { cat "$work/pip.log" >&2; fail "pip did not install both wheels (above)"; }

[[ "$(as sh -c 'command -v mgtrain')" == "$venv/bin/mgtrain" ]] || fail "mgtrain is not the venv's bin/mgtrain"
[[ "$(head -c 4 "$venv/bin/mgtrain" | od -An -c | tr -d ' ')" == '177ELF' ]] ||
  fail "bin/mgtrain is not the binary itself: $(head -c 200 "$venv/bin/mgtrain")"
# Every library the installed binaries load beyond the manylinux ones comes from the venv (the wheels' own copies, or
# the torch package's), never from this machine's Debian packages.
allowed='^(libstdc\+\+\.so\.6|libgcc_s\.so\.1|libc\.so\.6|libm\.so\.6|libdl\.so\.2|librt\.so\.1|libpthread\.so\.0|libz\.so\.1|libexpat\.so\.1|libX11\.so\.6|libXext\.so\.6|libXrender\.so\.1|libutil\.so\.1|linux-vdso\.so\.1)$'
for binary in "$venv"/bin/mgtrain* "$venv"/lib/mgtrain/*.so* "$site/mgtrain_trainer/bin/mgtrain-worker"; do
  [[ -f "$binary" ]] || continue
  ldd "$binary" | awk -v venv="$venv/" -v allowed="$allowed" -v binary="$binary" '
    $2 == "=>" && $1 !~ allowed && index($3, venv) != 1 { print "wheel_test: " binary " loads " $1 " from " $3; bad = 1 }
    END { exit bad }' || fail "an installed binary loads a library from outside the venv (above)"
done
out=$(as mgtrain --version) || fail "mgtrain --version exited with $?"
[[ "$out" == "mgtrain $version "* ]] || fail "mgtrain --version printed '$out', not version $version"
say "mgtrain --version: $out"
out=$(as python -m mgtrain) || fail "python -m mgtrain exited with $?"
echo "$out"
prefix=$(as python -m mgtrain_trainer)
[[ "$prefix" == "$site/mgtrain_trainer" ]] || fail "python -m mgtrain_trainer printed '$prefix'"
[[ "$(as python -m mgtrain --cmake-prefix-path)" == "$prefix" ]] || fail "python -m mgtrain --cmake-prefix-path"
[[ "$out" == *"configs:  $site/mgtrain/configs"* && -f "$site/mgtrain/configs/bench/mlp-64.yaml" ]] ||
  fail "python -m mgtrain names no configs folder"

# With the status API (the wheel's lib/mgtrain module, loaded by the launcher), then plotted (bin/mgtrain-plot).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
say "as $user: mgtrain launch --nproc 2 --status-port $port mlp-64.yaml train.max_steps=20"
as mgtrain launch --nproc 2 --run-id bench --status-port "$port" "$site/mgtrain/configs/bench/mlp-64.yaml" \
  train.max_steps=20 log.every_steps=10 >"$work/bench.log" 2>&1 ||
  { cat "$work/bench.log" >&2; fail "the bench config's launch exited with $?"; }
grep -q '"world_size":2[,}]' "$work/bench.log" && grep -q '"steps":20[,}]' "$work/bench.log" ||
  { cat "$work/bench.log" >&2; fail "the launch did not train 20 steps on 2 ranks (above)"; }
grep -q "status API and dashboard on http://127.0.0.1:$port/" "$work/bench.log" ||
  { cat "$work/bench.log" >&2; fail "the launch served no status API (above)"; }
say "20 steps on 2 ranks with the wheel's worker, found without launch.worker; the status API served"
if [[ -x "$venv/bin/mgtrain-plot" ]]; then
  as mgtrain plot bench -o loss.png >"$work/plot.log" 2>&1 || { cat "$work/plot.log" >&2; fail "mgtrain plot"; }
  [[ "$(head -c 4 "$work/run/loss.png" | od -An -c | tr -d ' ')" == '211PNG' ]] || fail "mgtrain plot wrote no PNG"
  say "mgtrain plot drew loss.png"
fi

say "as $user: mgtrain torchrun --nproc-per-node 2 allreduce.py"
as mgtrain torchrun --nproc-per-node 2 allreduce.py >"$work/torchrun.log" 2>&1 ||
  { cat "$work/torchrun.log" >&2; fail "mgtrain torchrun exited with $?"; }
for rank in 0 1; do
  grep -q "rank $rank of 2: all_reduce gave 3" "$work/torchrun.log" ||
    { cat "$work/torchrun.log" >&2; fail "rank $rank's all_reduce (above)"; }
done

say "as $user: examples/custom_model against -DCMAKE_PREFIX_PATH=$prefix"
as cmake -S custom_model -B custom_model/build -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; fail "the example's configure"; }
as cmake --build custom_model/build -j 2 >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; fail "the example's build"; }
as mgtrain launch --nproc 2 --worker custom_model/build/custom-worker --run-id custom custom_model/custom.yaml \
  train.max_steps=20 log.every_steps=10 >"$work/custom.log" 2>&1 ||
  { cat "$work/custom.log" >&2; fail "the custom worker's launch exited with $?"; }
grep -q '"steps":20[,}]' "$work/custom.log" || { cat "$work/custom.log" >&2; fail "the custom worker's 20 steps"; }
say "the custom worker built against the wheel trained 20 steps"

as python -m pip uninstall --disable-pip-version-check -y mgtrain-trainer mgtrain >"$work/uninstall.log" 2>&1 ||
  { cat "$work/uninstall.log" >&2; fail "pip uninstall"; }
find "$venv" | sort >"$work/after.txt"
if ! diff "$work/before.txt" "$work/after.txt" >"$work/left.txt"; then
  cat "$work/left.txt" >&2
  fail "pip uninstall left files behind or took some away (above)"
fi
say "pip uninstall left no file of mgtrain"

# The launcher wheel alone, in a venv without torch: it runs any program, and asks for the trainer wheel by name when a
# config needs the built-in trainer.
bare=$work/bare
/usr/bin/python3 -m venv "$bare"
chown -R "$user" "$bare"
bare_as() { (cd "$work/run" && env -i HOME="$work/home" PATH="$bare/bin:/usr/bin:/bin" "${as_user[@]}" "$@"); }
bare_as python -m pip install --disable-pip-version-check --no-cache-dir --no-index --find-links "$work/dist" mgtrain \
  >"$work/bare-pip.log" 2>&1 || { cat "$work/bare-pip.log" >&2; fail "pip install mgtrain into a venv without torch"; }
out=$(bare_as mgtrain launch --nproc 2 --run-id bare -- python -c 'import os; print("rank", os.environ["RANK"])' 2>&1) ||
  { echo "$out" >&2; fail "mgtrain launch -- python without torch exited with $?"; }
[[ "$out" == *"rank 0"* && "$out" == *"rank 1"* ]] || { echo "$out" >&2; fail "the two ranks did not run (above)"; }
set +e
out=$(bare_as mgtrain launch --nproc 2 "$bare"/lib/python3*/site-packages/mgtrain/configs/bench/mlp-64.yaml 2>&1)
status=$?
set -e
[[ $status -eq 2 && "$out" == *"pip install mgtrain-trainer"* ]] ||
  { echo "$out" >&2; fail "a config without the trainer wheel exited with $status, not 2 naming mgtrain-trainer"; }
say "the launcher wheel alone runs programs without torch; a config asks for mgtrain-trainer (exit 2)"
say "passed"
