#!/usr/bin/env bash
# Checkpoint write throughput against `dd ... conv=fsync` into the same directory (issue 5's goal: >= 80% of dd).
# In one run, alternating ROUNDS times: dd if=/dev/zero of=DIR/dd.bin bs=8M count=K conv=fsync, then
# checkpoint_write_tool writing a checkpoint of the same size into DIR through the core API (JSON header, XXH64 of
# every byte, fsync, rename, directory fsync, the `latest` pointer). Prints the median MB/s (10^6 bytes/s, as dd
# reports) of both and the ratio. Both sides report their own timing: dd from open to fsync'd close, the tool
# around write_checkpoint_file + update_latest_pointer (not the generation of its test data).
# Usage: scripts/bench/checkpoint_write.sh [DIR]
#   SIZE_MB=256 (MiB, a multiple of 8), ROUNDS=3 (odd is best for medians)
#   BUILD_DIR=build: the tool is BUILD_DIR/tests/checkpoint_write_tool (`ninja -C build checkpoint_write_tool`);
#   CHECKPOINT_WRITE_TOOL=PATH overrides. DIR defaults to a fresh directory under $TMPDIR (or /tmp), removed at
#   the end; with a DIR given only the files the benchmark writes are removed.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-3}
size_mb=${SIZE_MB:-256}
tool=${CHECKPOINT_WRITE_TOOL:-${BUILD_DIR:-build}/tests/checkpoint_write_tool}
export LC_ALL=C

if (( size_mb % 8 != 0 || size_mb <= 0 )); then echo "SIZE_MB=$size_mb: must be a positive multiple of 8" >&2; exit 2; fi
if [[ ! -x $tool ]]; then
  echo "$tool not found: build it with 'ninja -C ${BUILD_DIR:-build} checkpoint_write_tool' (or set CHECKPOINT_WRITE_TOOL)" >&2
  exit 2
fi
if [[ $# -ge 1 ]]; then
  dir=$1
  mkdir -p "$dir"
  trap 'rm -f "$dir"/dd.bin "$dir"/checkpoint-step*.safetensors "$dir"/latest' EXIT
else
  dir=$(mktemp -d "${TMPDIR:-/tmp}/mgtrain-checkpoint-bench-XXXXXX")
  trap 'rm -rf "$dir"' EXIT
fi

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

dd_rates="" tool_rates=""
for round in $(seq 1 "$rounds"); do
  rm -f "$dir"/dd.bin "$dir"/checkpoint-step*.safetensors
  sync
  # "268435456 bytes (268 MB, 256 MiB) copied, 0.61 s, 440 MB/s" -> bytes / seconds / 1e6
  dd_rate=$(dd if=/dev/zero of="$dir/dd.bin" bs=8M count=$((size_mb / 8)) conv=fsync 2>&1 |
    sed -nE 's/^([0-9]+) bytes.* copied, ([0-9.e+-]+) s,.*/\1 \2/p' | awk '{printf "%.1f", $1 / $2 / 1e6}')
  rm -f "$dir"/dd.bin
  sync
  # "checkpoint_write_tool: wrote PATH: 268436168 bytes in 0.6 s, 440.0 MB/s"
  tool_rate=$("$tool" "$dir" "$round" "$size_mb" | sed -nE 's/.*: ([0-9]+) bytes in ([0-9.e+-]+) s,.*/\1 \2/p' |
    awk '{printf "%.1f", $1 / $2 / 1e6}')
  echo "round $round/$rounds: dd $dd_rate MB/s, checkpoint $tool_rate MB/s" >&2
  dd_rates+="$dd_rate"$'\n'
  tool_rates+="$tool_rate"$'\n'
done

dd_median=$(printf '%s' "$dd_rates" | median)
tool_median=$(printf '%s' "$tool_rates" | median)
printf '\n%s\n' "checkpoint write throughput, $size_mb MiB into $(df -PT "$dir" | awk 'NR == 2 {print $2}') ($dir), median of $rounds"
printf '%-34s %10.1f MB/s\n' "dd bs=8M conv=fsync" "$dd_median"
printf '%-34s %10.1f MB/s\n' "checkpoint_write_tool" "$tool_median"
printf '%-34s %10.2f\n' "checkpoint / dd" "$(awk -v a="$tool_median" -v b="$dd_median" 'BEGIN {print a / b}')"
