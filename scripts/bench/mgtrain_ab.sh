#!/usr/bin/env bash
# Two mgtrain builds side by side on one training config, alternating A and B (B first in every other round), ROUNDS
# times: the medians of samples/s and step time, and B's ratio to A. For "did this change make training faster",
# where one run of each is lost in the noise of a small machine.
# Usage: MGTRAIN_A=<old build>/bin/mgtrain MGTRAIN_B=build/bin/mgtrain scripts/bench/mgtrain_ab.sh CONFIG [launch args]
#   ROUNDS=9 (default); launch args as for mgtrain launch, e.g. --nproc 2 train.max_steps=2000
set -euo pipefail
cd "$(dirname "$0")/../.."
die() { echo "mgtrain_ab.sh: $*" >&2; exit 2; }
[[ $# -ge 1 ]] || die "usage: MGTRAIN_A=... MGTRAIN_B=... scripts/bench/mgtrain_ab.sh CONFIG [launch args]"
a=${MGTRAIN_A:-} b=${MGTRAIN_B:-build/bin/mgtrain} rounds=${ROUNDS:-9}
[[ -x $a ]] || die "MGTRAIN_A=$a: not an executable (the build to compare against)"
[[ -x $b ]] || die "MGTRAIN_B=$b: not an executable"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "ROUNDS=$rounds: expected a positive integer"
config=$1
shift
[[ -f $config ]] || die "$config: no such config"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

field() { grep -o '{"summary".*' | head -1 | sed -E "s/.*\"$1\": ?([0-9.e+-]+).*/\1/"; }
run() {  # run BINARY -> "samples_per_s step_time_ms"
  local out
  out=$("$1" launch --log-dir "$work" "$config" "${args[@]}" 2>"$work/err") || { cat "$work/err" >&2; die "$1 failed"; }
  echo "$(field samples_per_s <<<"$out") $(field step_time_ms <<<"$out")"
}
args=("$@")
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
sa="" sb="" ta="" tb=""
for round in $(seq 1 "$rounds"); do
  order=(a b)
  ((round % 2)) || order=(b a)
  for side in "${order[@]}"; do
    binary=$a
    [[ $side == a ]] || binary=$b
    read -r s t <<<"$(run "$binary")"
    if [[ $side == a ]]; then sa+="$s"$'\n' ta+="$t"$'\n'; else sb+="$s"$'\n' tb+="$t"$'\n'; fi
  done
  echo "round $round/$rounds" >&2
done
ma=$(printf '%s' "$sa" | median) mb=$(printf '%s' "$sb" | median)
printf '%-28s %14s %14s %8s\n' "median of $rounds" "A" "B" "B / A"
printf '%-28s %14.1f %14.1f %7.3fx\n' "samples/s" "$ma" "$mb" "$(awk -v x="$mb" -v y="$ma" 'BEGIN { print x / y }')"
printf '%-28s %14.3f %14.3f %7.3fx\n' "step time ms" "$(printf '%s' "$ta" | median)" "$(printf '%s' "$tb" | median)" \
  "$(awk -v x="$(printf '%s' "$tb" | median)" -v y="$(printf '%s' "$ta" | median)" 'BEGIN { print x / y }')"
echo "samples/s per round: A $(paste -sd' ' <<<"${sa%$'\n'}"); B $(paste -sd' ' <<<"${sb%$'\n'}")"
