#!/usr/bin/env bash
# Fault campaign (issue 37; a benchmark, not a test): one training run of the built-in trainer on 2 of 3 nodes (network
# namespaces A, B, C: scripts/bench/netns_nodes.sh), `--nnodes 2:2`, the third node a standby, and FAULTS faults
# injected one after another at random steps. The run must end with the same final checkpoint as an uninterrupted run
# of the same job, tensor for tensor. Once per SIDE:
#   memory   snapshots in memory every SNAPSHOT_EVERY steps (docs/checkpoints.md#snapshots-in-memory) and a file
#            every FILE_EVERY steps
#   disk     files only (checkpoint.snapshot_every=0): the deal of today
#   torchrun the same trainer (mgtrain-worker, files only) under torch 2.x's torchrun (`--no-python`, c10d rendezvous
#            at A, `--max-restarts 100`): like with like but for the agent. Only the faults torchrun can recover from
#            at all: worker, mid-snapshot (a plain SIGKILL: no snapshots), node, node+worker. It has no hang
#            detection, and a cut link leaves the peers blocked in the collective until ddp.timeout_s (1800 s): the
#            hang and netcut faults are skipped (the tables say so). And no standby: a third agent beyond
#            --nnodes 2:2 lands in torch's wait list at each new round and the agents restart the worker group over
#            and over ("Detected 1 new nodes ... will restart worker group": 81 restarts in 2 minutes when tried).
#            So C is never started, and a lost node's agent is started again as its replacement once the rendezvous
#            dropped the dead one (15 s: torch's keep-alive; started at once, it joins a round with the dead node and
#            the job is lost). With
#            TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: with its default shared store torch 2.15 recovers no lost node.
# The faults, in turn (A hosts the rendezvous and is never lost; "a node" is A or the active one of B and C):
#   worker        SIGKILL of a node's worker, mid-step
#   mid-snapshot  SIGKILL of a node's worker while it writes a snapshot (MGTRAIN_TEST_SNAPSHOT_PAUSE_FILE stops it
#                 there; the disk side has no snapshots: a plain SIGKILL)
#   node          the active non-host node dies (every process in its namespace SIGSTOPped, then SIGKILLed); the
#                 standby takes its place; the dead node's agent is started again as the next standby
#   hang          SIGSTOP of a node's worker: the launchers' hang detection (--hang-timeout HANG_TIMEOUT) stops the job
#                 and it restarts
#   netcut        the active non-host node's link goes down: the others notice within --node-timeout and go on with
#                 the standby; the link comes back, the cut agent is stopped and started again as the next standby
#   node+worker   the active non-host node dies and A's worker is SIGKILLed right after, before the recovery
# Per fault (from A's console, stamped by this script on arrival): the steps lost (the last step rank 0 reported before
# the fault - the step the job resumed from), the seconds from the fault to rank 0's first step after the resume, and
# which copy was used ("memory" each rank's own, "memory from a peer", "replica" a buddy node's, "file", or
# "scratch"). At the end: the final
# checkpoint against the uninterrupted run's (every tensor, bit for bit), worker processes left over (orphans),
# checkpoint files that do not verify (torn), and the medians per side. Prints a table per side and a summary.
# Usage: scripts/bench/recovery_campaign.sh      (root: network namespaces; build/bin/mgtrain and mgtrain-worker)
#   FAULTS=20 SIDES="memory disk torchrun" SEED=<random> STEPS=20000 SNAPSHOT_EVERY=50 FILE_EVERY=500 HANG_TIMEOUT=5
#   SUBNET=10.81.0 PORT=29600 MGTRAIN=build/bin/mgtrain LOG_DIR=<kept; default: a temp dir, removed>
#   TORCHRUN=$HOME/.cache/mgtrain/torch-<scripts/torch2-version>/bin/torchrun (scripts/torch2-env.sh makes it)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.."
name=recovery_campaign.sh
die() { echo "$name: $*" >&2; exit 2; }

faults=${FAULTS:-20}
sides=${SIDES:-memory disk torchrun}
seed=${SEED:-$((RANDOM * 32768 + RANDOM))}
steps=${STEPS:-20000}
snapshot_every=${SNAPSHOT_EVERY:-50}
file_every=${FILE_EVERY:-500}
hang_timeout=${HANG_TIMEOUT:-5}
subnet=${SUBNET:-10.81.0}
port=${PORT:-29600}
mgtrain=${MGTRAIN:-build/bin/mgtrain}
for knob in FAULTS=$faults STEPS=$steps SNAPSHOT_EVERY=$snapshot_every FILE_EVERY=$file_every \
    HANG_TIMEOUT=$hang_timeout PORT=$port SEED=$seed; do
  [[ ${knob#*=} =~ ^[0-9]+$ && ${knob#*=} -gt 0 ]] || die "$knob: expected a positive integer"
done
for side in $sides; do
  [[ $side =~ ^(memory|disk|torchrun)$ ]] || die "SIDES=$sides: each is memory, disk or torchrun, not '$side'"
done
torchrun=${TORCHRUN:-$HOME/.cache/mgtrain/torch-$(tr -d '[:space:]' <scripts/torch2-version)/bin/torchrun}
if [[ " $sides " == *" torchrun "* ]]; then
  [[ -x $torchrun ]] || die "TORCHRUN=$torchrun: not an executable (torch 2.x's torchrun: scripts/torch2-env.sh)"
fi
((steps >= faults * 600)) || die "STEPS=$steps: too few for $faults faults (at least 600 steps each)"
[[ -x $mgtrain && -x $(dirname "$mgtrain")/mgtrain-worker ]] ||
  die "MGTRAIN=$mgtrain: no mgtrain with mgtrain-worker beside it (scripts/build.sh mgtrain mgtrain-worker)"
RANDOM=$seed

source scripts/bench/netns_nodes.sh
if [[ -n ${LOG_DIR:-} ]]; then work=$LOG_DIR; mkdir -p "$work"; else work=$(mktemp -d); fi
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  remove_nodes
  wait 2>/dev/null || true
  [[ -n ${LOG_DIR:-} ]] || rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
make_nodes "fc$(($$ % 100000))"
node_names=(A B C)

agent_pid=(0 0 0)
side_of() { basename "$1"; }  # a side's folder is $work/<side>
start_agent() {  # start_agent DIR NODE EVERY RUN_ID: the node's agent in its namespace, its output stamped
  local dir=$1 i=$2 every=$3 id=$4 log=$1/${node_names[$2]}.log
  if [[ $(side_of "$dir") == torchrun ]]; then start_torchrun "$@"; return; fi
  ip netns exec "${hosts[i]}" env OMP_NUM_THREADS=1 MGTRAIN_SHM_ALLREDUCE=0 GLOO_SOCKET_IFNAME=eth0 \
    MGTRAIN_TEST_SNAPSHOT_PAUSE_FILE="$dir/pause-$i" \
    "$mgtrain" launch --nnodes 2:2 --rdzv-endpoint "$subnet.1:$port" --rdzv-id "$id" --nproc 1 --max-restarts 100 \
    --hang-timeout "$hang_timeout" --node-timeout 4 --grace-period 1 --last-call-timeout 1 --join-timeout 120 \
    --log-dir "$dir/logs" configs/bench/mlp-64.yaml "train.max_steps=$steps" data.synthetic_samples=4096 \
    data.loader_threads=0 "checkpoint.dir=$dir/ckpt" "checkpoint.every_steps=$file_every" checkpoint.every_epochs=0 \
    checkpoint.keep_last=1000 "checkpoint.snapshot_every=$every" log.every_steps=1 ddp.connect_timeout_s=60 \
    </dev/null > >(stamp >>"$log") 2>&1 &
  agent_pid[i]=$!
}

# torchrun: the same trainer and files, torch's agent; rank 0 may be on any node after a regroup. LOGLEVEL=INFO for its
# "Rendezvous complete" lines, its rendezvous at DEBUG for "added itself to the redundancy list" (a standby).
start_torchrun() {
  local dir=$1 i=$2 id=$4 log=$1/${node_names[$2]}.log is_host=false
  ((i != 0)) || is_host=true
  # TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: with its shared store torch 2.15 does not recover a lost node at all
  # (docs/PERFORMANCE.md#recovery-after-a-lost-node-issue-36); torch's own switch back to a store per round does.
  ip netns exec "${hosts[i]}" env OMP_NUM_THREADS=1 MGTRAIN_SHM_ALLREDUCE=0 GLOO_SOCKET_IFNAME=eth0 LOGLEVEL=INFO \
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 TORCH_LOGS=+torch.distributed.elastic.rendezvous.dynamic_rendezvous \
    "$torchrun" --nnodes 2:2 --rdzv-backend c10d --rdzv-endpoint "$subnet.1:$port" --rdzv-id "$id" \
    --rdzv-conf "is_host=$is_host" --local-addr "$subnet.$((i + 1))" --nproc-per-node 1 --max-restarts 100 \
    --no-python "$(dirname "$mgtrain")/mgtrain-worker" configs/bench/mlp-64.yaml "train.max_steps=$steps" \
    data.synthetic_samples=4096 data.loader_threads=0 "checkpoint.dir=$dir/ckpt" "checkpoint.every_steps=$file_every" \
    checkpoint.every_epochs=0 checkpoint.keep_last=1000 checkpoint.snapshot_every=0 log.every_steps=1 \
    ddp.connect_timeout_s=60 </dev/null > >(stamp >>"$log") 2>&1 &
  agent_pid[i]=$!
}

# The console lines of the job, in the order they arrived: A's (mgtrain: rank 0's lines reach A's console); every
# node's, merged by their stamps (torchrun: rank 0 may be on any node).
a_log() {
  if [[ $(side_of "$1") == torchrun ]]; then
    cat "$1"/[ABC].log 2>/dev/null | sort -s -n -k1,1 >"$1/merged.log"
    echo "$1/merged.log"
  else
    echo "$1/A.log"
  fi
}
step_line='mgtrain: step [0-9]+/'  # rank 0's (the trainer prints its steps on rank 0 only)
last_step() {  # rank 0's newest step line (0 before any)
  local step
  step=$(grep -aE "$step_line" "$(a_log "$1")" | tail -n 1 | sed -nE 's/.*mgtrain: step ([0-9]+)\/.*/\1/p')
  echo "${step:-0}"
}
trained_to() { (($(last_step "$1") >= $2)); }
standbys() {
  local n pattern='waits as a standby'
  [[ $(side_of "$1") != torchrun ]] || pattern='added itself to the redundancy list'
  n=$(grep -ac "$pattern" "$1/${node_names[$2]}.log" 2>/dev/null) || true
  echo "${n:-0}"
}
standby_of() { (($(standbys "$1" "$2") > ${3:-0})); }
worker_of() {  # the pid of node I's worker, or nothing
  local pid
  for pid in $(ip netns pids "${hosts[$1]}" 2>/dev/null); do
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q '^[^ ]*mgtrain-worker '; then echo "$pid"; return; fi
  done
}
active_other() {  # which of B (1) and C (2) runs a worker now, or nothing
  local i
  for i in 1 2; do [[ -z $(worker_of "$i") ]] || { echo "$i"; return; }; done
}
paused_count() {
  local n
  n=$(grep -ac 'snapshot write paused at step' "$1/${node_names[$2]}.log" 2>/dev/null) || true
  echo "${n:-0}"
}
# A new round began: mgtrain's host says so; torchrun's agents once the rendezvous is complete.
round_line='mgtrain: round [0-9]+:|Rendezvous complete for workers'
# recovered DIR FAULT_TIME: rank 0 made a step after a new round began after the fault
recovered() {
  awk -v f="$2" -v r="$round_line" -v s="$step_line" '$1 > f && $0 ~ r { round = 1 }
                 round && $1 > f && $0 ~ s { found = 1; exit } END { exit !found }' "$(a_log "$1")"
}
job_over() { ! alive "${agent_pid[0]}"; }
# dropped DIR FAULT_TIME ADDRESS: torchrun's rendezvous on A dropped the node at ADDRESS after the fault
dropped() {
  awk -v f="$2" -v node="Detected dead node '$3_" '$1 > f && index($0, node) { found = 1 } END { exit !found }' "$1/A.log"
}

# figures DIR FAULT_TIME: "lost=N seconds=S copy=C resumed=R last=L" from A's console
figures() {
  awk -v f="$2" -v r="$round_line" -v s="$step_line" '
    function step_of(line) { sub(/.*mgtrain: step /, "", line); sub(/\/.*/, "", line); return line + 0 }
    !round && $0 ~ s { last = step_of($0) }  # (lines arrive in order, some late)
    $1 > f && $0 ~ r { round = 1 }
    round && resumed == "" && /mgtrain: resumed from / {
      line = $0; sub(/.*: step /, "", line); resumed = line + 0
      copy = /snapshot in memory \(each/ ? "memory" : /snapshot in memory of rank/ ? "memory-from-peer" : \
             /from the replica of rank/ ? "replica" : "file" }
    round && first == "" && $0 ~ s { first = $1; at = step_of($0)
      if (resumed == "") { resumed = at - 1; copy = "scratch" } }
    # A rank prints a step after its snapshot of that step: one stopped mid-snapshot resumes one past its last line.
    END { lost = last > resumed ? last - resumed : 0
          printf "last=%d resumed=%d lost=%d seconds=%.2f copy=%s", last, resumed, lost, first - f, copy }
  ' "$(a_log "$1")"
}

fault_types=(worker mid-snapshot node hang netcut node+worker)

# run_side SIDE: the uninterrupted reference (first call only), then the campaign; appends to $work/results
run_side() {
  local side=$1 every=$snapshot_every dir=$work/$1 k lost_job=0
  [[ $side == memory ]] || every=0
  mkdir -p "$dir"
  start_agent "$dir" 0 "$every" "camp-$side"
  start_agent "$dir" 1 "$every" "camp-$side"
  wait_for 120 trained_to "$dir" 1 || die "$side: A and B did not start training within 120 s: see $dir"
  if [[ $side != torchrun ]]; then  # torchrun: no standby (see the header)
    start_agent "$dir" 2 "$every" "camp-$side"
    wait_for 60 standby_of "$dir" 2 || die "$side: C did not wait as a standby within 60 s: see $dir"
  fi
  for ((k = 1; k <= faults; k++)); do
    local type=${fault_types[(k - 1) % ${#fault_types[@]}]}
    if [[ $side == torchrun && ($type == hang || $type == netcut) ]]; then
      echo "side=$side fault=$k type=$type skipped" >>"$work/results"
      echo "$name: side=$side fault=$k type=$type: skipped (torchrun cannot recover from it: see the header)" >&2
      continue
    fi
    local target=$(($(last_step "$dir") + 100 + RANDOM % 400))
    ((target < steps - 100)) || { echo "$side: fault $k: too close to the end (step $target), stopping here" >&2; break; }
    wait_for 300 trained_to "$dir" "$target" || die "$side: fault $k: training did not reach step $target: see $dir"
    local other victim fault
    other=$(active_other)
    [[ -n $other ]] || die "$side: fault $k: neither B nor C runs a worker: see $dir"
    victim=$(((RANDOM % 2) * other))  # A or the active other node
    case $type in
      worker) fault=$EPOCHREALTIME; kill -KILL "$(worker_of "$victim")" ;;
      mid-snapshot)
        if [[ $side == memory ]]; then
          local before
          before=$(paused_count "$dir" "$victim")
          touch "$dir/pause-$victim"
          wait_for 60 eval "(( \$(paused_count '$dir' $victim) > $before ))" ||
            die "$side: fault $k: node ${node_names[victim]}'s worker did not stop in a snapshot: see $dir"
        fi
        fault=$EPOCHREALTIME; kill -KILL "$(worker_of "$victim")" ;;
      node) victim=$other; disown "${agent_pid[other]}"; fault=$EPOCHREALTIME; kill_namespace "${hosts[other]}" ;;
      hang) fault=$EPOCHREALTIME; kill -STOP "$(worker_of "$victim")" ;;
      netcut) victim=$other; fault=$EPOCHREALTIME; ip -n "${hosts[other]}" link set eth0 down ;;
      node+worker)
        victim=$other; disown "${agent_pid[other]}"; fault=$EPOCHREALTIME; kill_namespace "${hosts[other]}"
        kill -KILL "$(worker_of 0)" ;;
    esac
    if [[ $side == torchrun && ($type == node || $type == node+worker) ]]; then
      # The replacement node, once the rendezvous dropped the dead one (its keep-alive 15 s old): one started at
      # once joins a round with the dead node still in it, and the job is lost.
      wait "${agent_pid[other]}" 2>/dev/null || true
      wait_for 60 dropped "$dir" "$fault" "$subnet.$((other + 1))" || true
      start_agent "$dir" "$other" "$every" "camp-$side"
    fi
    if ! wait_for 180 recovered "$dir" "$fault"; then
      [[ $side == torchrun ]] || die "$side: fault $k ($type): no step after a new round within 180 s: see $dir"
      # torchrun's job can be lost: recorded, and the side ends here.
      echo "side=$side fault=$k type=$type node=${node_names[victim]} lost-job" >>"$work/results"
      echo "$name: side=$side fault=$k type=$type: no step within 180 s: the job is lost; see $dir" >&2
      lost_job=1
      break
    fi
    if [[ $type == netcut ]]; then
      ip -n "${hosts[other]}" link set eth0 up
      wait_for 30 job_over_or_gone "$other" || true
      disown "${agent_pid[other]}" 2>/dev/null || true
      kill_namespace "${hosts[other]}"
    fi
    if [[ $side != torchrun && ($type == node || $type == netcut || $type == node+worker) ]]; then
      wait "${agent_pid[other]}" 2>/dev/null || true
      local was
      was=$(standbys "$dir" "$other")
      start_agent "$dir" "$other" "$every" "camp-$side"
      wait_for 60 standby_of "$dir" "$other" "$was" || die "$side: fault $k: the restarted node did not wait as a standby"
    fi
    local line
    line="side=$side fault=$k type=$type node=${node_names[victim]} $(figures "$dir" "$fault")"
    echo "$line" >>"$work/results"
    echo "$name: $line" >&2
  done
  ((lost_job)) || wait_for 600 job_over || die "$side: the job did not end within 600 s after the last fault: see $dir"
  local i
  for i in 1 2; do wait_for 30 eval "! alive ${agent_pid[i]}" || true; done
  local orphans=0
  for i in 0 1 2; do [[ -z $(worker_of "$i") ]] || orphans=$((orphans + 1)); done
  [[ $side != torchrun ]] || rm -f "$dir/merged.log"
  for i in 0 1 2; do disown "${agent_pid[i]}" 2>/dev/null || true; kill_namespace "${hosts[i]}" || true; done
  wait 2>/dev/null || true
  local torn=0 file
  for file in "$dir"/ckpt/checkpoint-step*.safetensors; do
    "$mgtrain" export "$file" -o "$work/verify.safetensors" --force >/dev/null 2>&1 || torn=$((torn + 1))
  done
  local final
  final=$(printf '%s/ckpt/checkpoint-step%09d.safetensors' "$dir" "$steps")
  echo "side=$side end orphans=$orphans torn=$torn same=$(same_tensors "$work/reference/ckpt" "$final")" >>"$work/results"
}
job_over_or_gone() { ! alive "${agent_pid[$1]}"; }

# same_tensors REF_DIR FILE: "yes (N tensors)" when every tensor of FILE equals the reference's final file's
same_tensors() {
  local reference
  reference=$(printf '%s/checkpoint-step%09d.safetensors' "$1" "$steps")
  [[ -f $2 ]] || { echo "no-final-checkpoint"; return; }
  python3 - "$reference" "$2" <<'PY'
import json, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
different = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
print("yes(%d-tensors)" % len(a) if not different else "NO(%s)" % ",".join(different[:5]))
PY
}

# The uninterrupted reference: the same job on A and B, no faults.
reference() {
  local dir=$work/reference
  mkdir -p "$dir"
  start_agent "$dir" 0 0 camp-reference
  start_agent "$dir" 1 0 camp-reference
  wait_for 600 job_over || die "the reference run did not end within 600 s: see $dir"
  wait_for 30 eval "! alive ${agent_pid[1]}" || true
  disown "${agent_pid[0]}" "${agent_pid[1]}" 2>/dev/null || true
  kill_namespace "${hosts[1]}" || true
  wait 2>/dev/null || true
  [[ -f $(printf '%s/ckpt/checkpoint-step%09d.safetensors' "$dir" "$steps") ]] || die "the reference run left no final checkpoint: see $dir"
}

echo "$name: $faults faults a side, sides: $sides, seed $seed (SEED=$seed repeats the steps), $steps steps," \
  "snapshot every $snapshot_every, file every $file_every; $(nproc) CPUs, $(uname -sr)"
: >"$work/results"
reference
for side in $sides; do run_side "$side"; done

# The tables and the summary.
for side in $sides; do
  echo
  echo "== $side: per fault (steps lost, seconds from the fault to rank 0's first step after the resume, the copy used)"
  awk -v side="$side" '$1 == "side=" side && $2 ~ /^fault=/ {
      for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      if ($4 == "skipped") { printf "  %2d %-13s skipped: the agent cannot recover from it\n", v["fault"], v["type"]; next }
      if ($5 == "lost-job") { printf "  %2d %-13s node %s  NOT RECOVERED: no step within 180 s, the job is lost\n", v["fault"],
                                      v["type"], v["node"]; next }
      printf "  %2d %-13s node %s  lost %4d  (step %5d -> %5d)  %6.2f s  %s\n", v["fault"], v["type"], v["node"],
             v["lost"], v["last"], v["resumed"], v["seconds"], v["copy"] }' "$work/results"
  awk -v side="$side" '$1 == "side=" side && $2 == "end" { printf "  end: %s %s %s\n", $3, $4, $5 }' "$work/results"
done
echo
echo "== summary (medians over the faults of a side; recovered = a step after the resume)"
for side in $sides; do
  awk -v side="$side" '
    function median(list, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && list[j-1] > list[j]; j--) {
        t = list[j]; list[j] = list[j-1]; list[j-1] = t }
      return n == 0 ? "nan" : (n % 2 ? list[(n+1)/2] : (list[n/2] + list[n/2+1]) / 2) }
    $1 == "side=" side && $2 ~ /^fault=/ && $4 == "skipped" { skipped++ }
    $1 == "side=" side && $2 ~ /^fault=/ && $5 == "lost-job" { lost_job = $3 }
    $1 == "side=" side && $2 ~ /^fault=/ && $4 != "skipped" && $5 != "lost-job" {
      for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      n++; lost[n] = v["lost"]; secs[n] = v["seconds"]; copies[v["copy"]]++
      t = v["type"]; tn[t]++; tl[t, tn[t]] = v["lost"]; ts[t, tn[t]] = v["seconds"] }
    END {
      m = median(lost, n)  # sorts lost[]: lost[n] is then the largest
      printf "  %-6s %2d faults recovered, steps lost median %s (max %s), seconds median %s; copies:", side, n, m,
             lost[n], median(secs, n)
      for (c in copies) printf " %s %d", c, copies[c]
      if (skipped) printf "; %d skipped (hang, netcut: not recoverable by this agent)", skipped
      if (lost_job) printf "; then the job was lost (%s)", lost_job
      printf "\n"
      for (t in tn) { for (i = 1; i <= tn[t]; i++) { a[i] = tl[t, i]; b[i] = ts[t, i] }
        printf "         %-13s x%d: lost %s, %s s\n", t, tn[t], median(a, tn[t]), median(b, tn[t]) }
    }' "$work/results"
done
