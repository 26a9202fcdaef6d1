#!/usr/bin/env bash
# Launcher benchmark (not a test): `mgtrain launch` against Debian's torchrun, side by side in one run
# on the same machine, alternating the two. Measures
#   1. wall time to start and end two trivial workers (/bin/true): median of $RUNS runs each;
#   2. peak RSS of the launcher (GNU time's "Maximum resident set size"): median of $RSS_RUNS runs;
#   3. latency from a worker's death to the launcher's exit (the other worker is stopped with
#      SIGTERM): median of $LATENCY_RUNS runs; the dying worker stamps $EPOCHREALTIME, a bash builtin.
# Results go to stdout; docs/PERFORMANCE.md records them with this command.
# Usage: scripts/bench/launcher.sh            (needs build/bin/mgtrain, torchrun, /usr/bin/time)
#   RUNS=20 RSS_RUNS=5 LATENCY_RUNS=10 MGTRAIN_BUILD_DIR=build scripts/bench/launcher.sh
#   TORCHRUN=<venv>/bin/torchrun scripts/bench/launcher.sh       (another torchrun, e.g. torch 2.x's)
#   MGTRAIN_BASELINE=<older mgtrain> scripts/bench/launcher.sh   (also an earlier build, in the same alternation:
#                                                                 the "baseline" column and new/baseline ratios)
#   MGTRAIN_PERSONALITY=torchrun scripts/bench/launcher.sh      (the mgtrain column runs mgtrain invoked as `torchrun`
#                                                                 through a symlink, with torchrun's flags; the
#                                                                 baseline stays `mgtrain launch`)
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=${RUNS:-20}
rss_runs=${RSS_RUNS:-5}
latency_runs=${LATENCY_RUNS:-10}
build=${MGTRAIN_BUILD_DIR:-build}
mgtrain=${MGTRAIN:-$build/bin/mgtrain}
torchrun=${TORCHRUN:-torchrun}
baseline=${MGTRAIN_BASELINE:-}
worker=scripts/bench/launcher_latency_worker.sh

for tool in "$mgtrain" "$torchrun" /usr/bin/time ${baseline:+"$baseline"}; do
  if ! command -v "$tool" >/dev/null; then
    echo "launcher.sh: $tool not found (build mgtrain with scripts/build.sh; apt-get install python3-torch time)" >&2
    exit 2
  fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mgtrain_cmd=("$mgtrain" launch --nproc 2 --log-dir "$tmp/runs")
if [[ ${MGTRAIN_PERSONALITY:-} == torchrun ]]; then
  mkdir "$tmp/bin" && ln -s "$(readlink -f "$(command -v "$mgtrain")")" "$tmp/bin/torchrun"
  mgtrain_cmd=("$tmp/bin/torchrun" --nproc-per-node 2 --no-python --log-dir "$tmp/runs")
elif [[ -n ${MGTRAIN_PERSONALITY:-} ]]; then
  echo "launcher.sh: MGTRAIN_PERSONALITY is 'torchrun' or unset, not '$MGTRAIN_PERSONALITY'" >&2
  exit 2
fi
baseline_cmd=("$baseline" launch --nproc 2 --log-dir "$tmp/runs-baseline")
torchrun_cmd=("$torchrun" --standalone --monitor_interval 0.1 --nproc_per_node 2 --no_python --redirects 9:1 --tee 9:1)

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", (b - a) * 1000 }'; }

wall_ms() {  # runs "$@" once, prints its wall time in ms
  local start=$EPOCHREALTIME
  "$@" >/dev/null 2>&1 || true
  ms_between "$start" "$EPOCHREALTIME"
}

rss_kb() { /usr/bin/time -f '%M' -o "$tmp/rss" "$@" >/dev/null 2>&1 || true; tail -n 1 "$tmp/rss"; }

latency_ms() {  # runs "$@" with the latency worker, prints death-to-exit in ms
  rm -f "$tmp/death"
  "$@" "$worker" "$tmp/death" >/dev/null 2>&1 || true
  local exited=$EPOCHREALTIME
  ms_between "$(cat "$tmp/death")" "$exited"
}

torchrun_python=$(head -n 1 "$(command -v "$torchrun")" | sed -n 's/^#!//p')
echo "machine: $(nproc) CPUs, $(uname -sr), torchrun of torch $(${torchrun_python:-/usr/bin/python3} -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')"
echo "mgtrain:  ${mgtrain_cmd[*]} -- /bin/true"
echo "torchrun: ${torchrun_cmd[*]} /bin/true"
if [[ -n "$baseline" ]]; then echo "baseline: ${baseline_cmd[*]} -- /bin/true"; fi
echo

: > "$tmp/wall_m"; : > "$tmp/wall_t"; : > "$tmp/wall_b"; : > "$tmp/rss_b"
# mgtrain and the baseline take turns at running first after torchrun (whose 600 MB leave the caches cold): neither
# column pays that alone.
for ((i = 0; i < runs; i++)); do
  if [[ -n "$baseline" ]] && ((i % 2)); then wall_ms "${baseline_cmd[@]}" -- /bin/true >> "$tmp/wall_b"; fi
  wall_ms "${mgtrain_cmd[@]}" -- /bin/true >> "$tmp/wall_m"
  if [[ -n "$baseline" ]] && ! ((i % 2)); then wall_ms "${baseline_cmd[@]}" -- /bin/true >> "$tmp/wall_b"; fi
  wall_ms "${torchrun_cmd[@]}" /bin/true >> "$tmp/wall_t"
done
: > "$tmp/rss_m"; : > "$tmp/rss_t"
for ((i = 0; i < rss_runs; i++)); do
  if [[ -n "$baseline" ]] && ((i % 2)); then rss_kb "${baseline_cmd[@]}" -- /bin/true >> "$tmp/rss_b"; fi
  rss_kb "${mgtrain_cmd[@]}" -- /bin/true >> "$tmp/rss_m"
  if [[ -n "$baseline" ]] && ! ((i % 2)); then rss_kb "${baseline_cmd[@]}" -- /bin/true >> "$tmp/rss_b"; fi
  rss_kb "${torchrun_cmd[@]}" /bin/true >> "$tmp/rss_t"
done
: > "$tmp/lat_m"; : > "$tmp/lat_t"
for ((i = 0; i < latency_runs; i++)); do
  latency_ms "${mgtrain_cmd[@]}" -- >> "$tmp/lat_m"
  latency_ms "${torchrun_cmd[@]}" >> "$tmp/lat_t"
done

wall_m=$(median < "$tmp/wall_m"); wall_t=$(median < "$tmp/wall_t")
rss_m=$(median < "$tmp/rss_m"); rss_t=$(median < "$tmp/rss_t")
lat_m=$(median < "$tmp/lat_m"); lat_t=$(median < "$tmp/lat_t")

awk -v wm="$wall_m" -v wt="$wall_t" -v rm="$rss_m" -v rt="$rss_t" -v lm="$lat_m" -v lt="$lat_t" \
    -v runs="$runs" -v rss_runs="$rss_runs" -v lat_runs="$latency_runs" 'BEGIN {
  printf "%-44s %12s %12s %10s\n", "measure (median)", "mgtrain", "torchrun", "torchrun/mgtrain"
  printf "%-44s %12.1f %12.1f %10.0fx\n", "wall time, 2 x /bin/true, ms (" runs " runs)", wm, wt, wt / wm
  printf "%-44s %12.1f %12.1f %10.0fx\n", "peak RSS, MB (" rss_runs " runs)", rm / 1024, rt / 1024, rt / rm
  printf "%-44s %12.1f %12.1f %10.0fx\n", "worker death -> launcher exit, ms (" lat_runs " runs)", lm, lt, lt / lm
}'
if [[ -n "$baseline" ]]; then
  wall_b=$(median < "$tmp/wall_b"); rss_b=$(median < "$tmp/rss_b")
  awk -v wm="$wall_m" -v wb="$wall_b" -v rm="$rss_m" -v rb="$rss_b" 'BEGIN {
    printf "\n%-44s %12s %12s %10s\n", "against the baseline (median)", "mgtrain", "baseline", "mgtrain/baseline"
    printf "%-44s %12.1f %12.1f %10.2f\n", "wall time, 2 x /bin/true, ms", wm, wb, wm / wb
    printf "%-44s %12.1f %12.1f %10.2f\n", "peak RSS, MB", rm / 1024, rb / 1024, rm / rb
  }'
fi
