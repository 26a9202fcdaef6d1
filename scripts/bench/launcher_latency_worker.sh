#!/usr/bin/env bash
# Worker for the failure-latency benchmark (scripts/bench/launcher.sh): rank 1 records the moment it
# dies ($EPOCHREALTIME, a bash builtin: no fork) into $1 and exits 1; every other rank sleeps until
# the launcher stops it with SIGTERM.
if [[ "$RANK" == 1 ]]; then
  sleep "${LATENCY_WORKER_DELAY:-0.5}"
  echo "$EPOCHREALTIME" > "$1"
  exit 1
fi
exec sleep 60
