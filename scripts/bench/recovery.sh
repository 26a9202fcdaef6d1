#!/usr/bin/env bash
# Recovery benchmark (issue 36): a node of an elastic job dies mid-training and a standby node takes its place, under
# `mgtrain launch` and under torch 2.x's torchrun, side by side on one machine, ROUNDS rounds, the sides alternating
# (SIDES in order in odd rounds, reversed in even ones). Reports per side the medians of the seconds from the fault
# to: failure detected, workers stopped, rendezvous complete, the first training step after the resume; the steps
# lost; whether the surviving agents stayed up; and the ratios torchrun / mgtrain.
#
# Three "nodes" are three Linux network namespaces on a bridge (as tests/integration/netns_hosts.cpp makes them): A, B
# and C, addresses $SUBNET.1-3, each with its own ports. Every node runs one agent with one worker (nproc 1), the same
# command on every node: `--nnodes 2:2` with the rendezvous endpoint at A's address (torchrun's c10d rendezvous, and
# mgtrain's own over the same flags), so A hosts the rendezvous, and `--max-restarts 3`. A and B form round 0 and
# train; C is started once they train and waits as a standby, since the round has its maximum of 2 nodes (mgtrain:
# "waits as a standby"; torchrun: the rendezvous' redundancy list). Once C waits and training has passed step
# KILL_AFTER, at a step at least KILL_OFFSET past the last checkpoint, node B dies: every process in B's namespace (its
# agent and its worker) is stopped with SIGSTOP, then SIGKILLed, so that neither can react. The kernel then closes
# their sockets, as when a host's processes crash; a power loss, where nothing answers any more, is not measured here.
# The fault is the moment before the SIGSTOP. A and C must then form round 1 and resume from the newest checkpoint.
#
# Sides (SIDES):
#   mgtrain           `mgtrain launch ... -- python scripts/bench/recovery_worker.py`
#   torchrun          `torchrun ... scripts/bench/recovery_worker.py`, torch's defaults
#   torchrun-noshare  the same with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (torch's switch back to one store per round:
#                     with the default shared store torch 2.15 does not recover from this fault: docs/PERFORMANCE.md)
#   trainer           `mgtrain launch ...` with the built-in trainer (mgtrain-worker): configs/bench/mlp-1024.yaml with
#                     the same MLP (784-512-512-10, batch 64, SGD momentum), a checkpoint every CKPT_EVERY steps,
#                     MGTRAIN_SHM_ALLREDUCE=0 (its all-reduce over the network: the nodes share one machine); not
#                     the same program, so no ratio: it shows what the launcher's recovery costs with a native worker
# The Python sides run the same program, scripts/bench/recovery_worker.py (gloo on CPU, the MLP above, a checkpoint
# every CKPT_EVERY steps to a shared folder, resume from the newest, one time-stamped line per step into a shared
# events file), with the torch venv's python. A resumed run trains STEPS_AFTER_RESUME more steps and exits 0, so
# every run ends by itself. Figures measured by this script from the program's own time stamps (the machine's wall
# clock, the same in every namespace and for every launcher):
#   first step     the fault -> the first step line of a worker started after the fault (trainer: the first step line
#                  of round 1 on A's console, stamped by this script on arrival)
#   worker start   the fault -> the first such worker's interpreter start: the launcher's share of the first step. The
#                  rest is the program's own start (python, `import torch`, init_process_group, the checkpoint load,
#                  one step), the same under every launcher
#   steps lost     the highest step made before the fault - the step the new round resumed from
#   agents up      A's and C's agents still running at the first step after the resume (they must be)
# and from each launcher's own account, converted to seconds from the fault:
#   mgtrain        run.json's "recovery" of round 0 (docs/monitoring.md#recovery): its fault (for a lost node the
#                  moment the rendezvous decided), detected_s, stopped_s, rendezvous_s, first_step_s (the first
#                  node-status report of a step: up to 0.5 s after the step itself)
#   torchrun       A's agent log (LOGLEVEL=INFO), each line stamped by this script on arrival: detected = "Worker group
#                  FAILED ... will restart", stopped = "Rendezvous'ing worker group" (logged once its workers were
#                  stopped), rendezvous complete = "has joined round N of the rendezvous" (the c10d round is complete;
#                  torch then assigns the ranks: "Rendezvous complete for workers")
#
# Like with like, and where it is not: every side gets OMP_NUM_THREADS=1 and GLOO_SOCKET_IFNAME=eth0 (inside the
# namespaces the host name resolves to 127.0.0.1), its own default timeouts (grace period / shutdown 30 s, torchrun's
# keep-alive 5 s x 3 and monitor interval 0.1 s), the same ports. What the setup needs beyond that, each as small as
# it can be:
#   - torchrun's A gets `--rdzv-conf is_host=true`, every torchrun agent `--local-addr <its address>`: torchrun decides
#     whether it hosts the c10d store by matching the endpoint with its host name's addresses, which inside a
#     namespace it cannot (mgtrain: the agent that can bind the endpoint hosts it);
#   - torchrun agents get LOGLEVEL=INFO and TORCH_LOGS=+<dynamic_rendezvous module> (its rendezvous log at DEBUG: the
#     only place where it says that a node joined the redundancy list, i.e. waits as a standby), and --log-dir in the
#     run's folder (instead of a new /tmp/torchelastic_* each; it writes nothing more there);
#   - mgtrain agents get --status-port (a port of their own namespace): workers get their progress file
#     (MGTRAIN_HEARTBEAT_FILE), by which the rendezvous host times the recovery, only with the status API or hang
#     detection on. The Python program then writes one 96-byte heartbeat line per step (a pwrite), which it skips
#     under torchrun.
#
# Usage: scripts/bench/recovery.sh        (as root: network namespaces; needs build/bin/mgtrain, the torch 2.x venv)
#   ROUNDS=3                rounds (each runs every side); medians over the rounds
#   SIDES="mgtrain torchrun torchrun-noshare trainer"   which sides, in this order in odd rounds
#   KILL_AFTER=200          the fault comes at a step >= this (and once C waits as a standby) ...
#   CKPT_EVERY=50           ... a checkpoint every this many steps ...
#   KILL_OFFSET=30          ... at a step at least this many past the last checkpoint (about KILL_OFFSET steps lost)
#   STEPS_AFTER_RESUME=100  steps a resumed Python run trains before it ends (the trainer: up to step
#                           KILL_AFTER + 10 x CKPT_EVERY)
#   START_TIMEOUT=120       seconds for round 0 to train, for C to wait as a standby, for the fault's step
#   RECOVER_TIMEOUT=120     seconds from the fault for the first step after it ("did not recover" after that, or
#                           as soon as the agents of A and C have both exited)
#   END_TIMEOUT=60          seconds from the first step after the fault for the agents of A and C to exit
#   SUBNET=10.79.0          the namespaces' /24 (inside the namespaces only: it cannot clash with the machine's)
#   PORT=29400              the rendezvous port of run 1 (run n: PORT + n - 1, so no run meets an earlier one's sockets)
#   MGTRAIN=build/bin/mgtrain   (the trainer side also needs mgtrain-worker next to it)
#   TORCHRUN=$HOME/.cache/mgtrain/torch-2.15.0/bin/torchrun   (scripts/torch2-env.sh makes it)
#   PYTHON=<TORCHRUN's directory>/python                      (the workers' interpreter on every Python side)
#   LOG_DIR=                keep every run's files there (default: a temporary directory, removed at the end)
# A quick check of every side: ROUNDS=1 scripts/bench/recovery.sh
# Exit codes: 0 the table was printed (also when a side did not recover: the table says so); 1 a run did not get as
# far as the fault (the script says why and shows the nodes' logs); 2 a refusal (not root, no usable `ip netns`, a
# tool or a setting missing or wrong); 128+N on signal N. Every wait has a deadline; on every exit each process in the
# namespaces is killed and the namespaces are deleted.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.."

rounds=${ROUNDS:-3}
sides=${SIDES:-mgtrain torchrun torchrun-noshare trainer}
kill_after=${KILL_AFTER:-200}
ckpt_every=${CKPT_EVERY:-50}
kill_offset=${KILL_OFFSET:-30}
steps_after=${STEPS_AFTER_RESUME:-100}
start_timeout=${START_TIMEOUT:-120}
recover_timeout=${RECOVER_TIMEOUT:-120}
end_timeout=${END_TIMEOUT:-60}
subnet=${SUBNET:-10.79.0}
base_port=${PORT:-29400}
mgtrain=${MGTRAIN:-build/bin/mgtrain}
torchrun=${TORCHRUN:-$HOME/.cache/mgtrain/torch-2.15.0/bin/torchrun}
python=${PYTHON:-$(dirname "$torchrun")/python}
worker=scripts/bench/recovery_worker.py
trainer_config=configs/bench/mlp-1024.yaml

die() { echo "recovery.sh: $*" >&2; exit 2; }
for knob in ROUNDS=$rounds KILL_AFTER=$kill_after CKPT_EVERY=$ckpt_every STEPS_AFTER_RESUME=$steps_after \
    START_TIMEOUT=$start_timeout RECOVER_TIMEOUT=$recover_timeout END_TIMEOUT=$end_timeout PORT=$base_port; do
  [[ ${knob#*=} =~ ^[1-9][0-9]*$ ]] || die "$knob: expected a positive integer"
done
if ! [[ $kill_offset =~ ^[0-9]+$ ]] || ((kill_offset >= ckpt_every)); then
  die "KILL_OFFSET=$kill_offset: expected an integer from 0 to CKPT_EVERY - 1 ($((ckpt_every - 1)))"
fi
((base_port + 4 * rounds + 1000 <= 65535)) || die "PORT=$base_port: too high (run n uses PORT + n - 1 and that + 1000)"
read -ra order <<<"$sides"
((${#order[@]} > 0)) || die "SIDES is empty"
for side in "${order[@]}"; do
  [[ $side =~ ^(mgtrain|torchrun|torchrun-noshare|trainer)$ ]] ||
    die "SIDES=$sides: each is mgtrain, torchrun, torchrun-noshare or trainer, not '$side'"
done
has() { [[ " ${order[*]} " == *" $1 "* ]]; }

# Refusals before anything is made (the namespaces' own: make_nodes).
if has mgtrain || has trainer; then
  [[ -x $mgtrain ]] || die "MGTRAIN=$mgtrain: not an executable (build it: scripts/build.sh mgtrain mgtrain-worker)"
fi
if has trainer; then
  [[ -x $(dirname "$mgtrain")/mgtrain-worker ]] ||
    die "SIDES has trainer: no mgtrain-worker next to $mgtrain (build it: scripts/build.sh mgtrain-worker)"
fi
if has torchrun || has torchrun-noshare; then
  [[ -x $torchrun ]] || die "TORCHRUN=$torchrun: not an executable (torch 2.x's torchrun: scripts/torch2-env.sh)"
fi
torch_version=-
if has mgtrain || has torchrun || has torchrun-noshare; then
  [[ -x $python ]] || die "PYTHON=$python: not an executable (the torch venv's python: scripts/torch2-env.sh)"
  torch_version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
    die "PYTHON=$python cannot import torch (scripts/torch2-env.sh makes a venv that can)"
fi

if [[ -n ${LOG_DIR:-} ]]; then
  work=$LOG_DIR
  mkdir -p "$work" || die "LOG_DIR=$work: cannot create it"
else
  work=$(mktemp -d)
fi

# ---- the namespaces (scripts/bench/netns_nodes.sh) ------------------------------------------------------------------
name=recovery.sh
source scripts/bench/netns_nodes.sh
node_names=(A B C)
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  remove_nodes
  wait 2>/dev/null || true  # the time stampers end once their agents' output has closed
  [[ -n ${LOG_DIR:-} ]] || rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
make_nodes "rc$(($$ % 100000))"

# ---- one run -------------------------------------------------------------------------------------------------------
python_side() { [[ $1 != trainer ]]; }

agent_pid=()
start_agent() {  # start_agent SIDE RUN_DIR PORT NODE_INDEX: the node's agent in its namespace, its output stamped
  local side=$1 dir=$2 port=$3 i=$4 name=${node_names[$4]}
  local endpoint=$subnet.1:$port
  local env=(BENCH_NODE="$name" OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=eth0)
  local args=(--events "$dir/events" --ckpt-dir "$dir/ckpt" --ckpt-every "$ckpt_every"
    --steps-after-resume "$steps_after")
  local launch=("$mgtrain" launch --nnodes 2:2 --rdzv-endpoint "$endpoint" --rdzv-id recovery --nproc 1
    --max-restarts 3 --log-dir "$dir/logs" --status-port "$((port + 1000))")
  local cmd
  case $side in
    mgtrain) cmd=("${launch[@]}" -- "$python" "$worker" "${args[@]}") ;;
    trainer)
      env+=(MGTRAIN_SHM_ALLREDUCE=0)  # over the network, as between machines (else shared memory: one machine)
      cmd=("${launch[@]}" "$trainer_config" "model.hidden_sizes=[512,512]"
        "train.max_steps=$((kill_after + 10 * ckpt_every))" log.every_steps=1 "checkpoint.every_steps=$ckpt_every"
        "checkpoint.dir=$dir/ckpt") ;;
    torchrun*)
      local is_host=false
      ((i != 0)) || is_host=true
      env+=(LOGLEVEL=INFO TORCH_LOGS=+torch.distributed.elastic.rendezvous.dynamic_rendezvous)
      [[ $side != torchrun-noshare ]] || env+=(TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1)
      cmd=("$torchrun" --nnodes 2:2 --rdzv-backend c10d --rdzv-endpoint "$endpoint" --rdzv-id recovery
        --rdzv-conf "is_host=$is_host" --local-addr "$subnet.$((i + 1))" --nproc-per-node 1 --max-restarts 3
        --log-dir "$dir/logs" "$worker" "${args[@]}") ;;
  esac
  echo "$name: ${env[*]} ${cmd[*]}" >>"$dir/commands"
  "$ip" netns exec "${hosts[i]}" env "${env[@]}" "${cmd[@]}" </dev/null > >(stamp >"$dir/$name.log") 2>&1 &
  agent_pid[i]=$!
}

# The progress of a run (SIDE DIR): the Python sides' events file ("<time> node= pid= rank= restart= <event> k=v ..."),
# the trainer's console on node A ("<time> [rank 0] mgtrain: step S/MAX ...", one a step with log.every_steps=1).
trainer_step_re='\] mgtrain: step [0-9]+/'
trained() {
  if python_side "$1"; then grep -q ' step step=' "$2/events"; else grep -Eq "$trainer_step_re" "$2/A.log"; fi
}
last_step() {  # the newest step, 0 before any
  local step
  if python_side "$1"; then
    step=$(tail -n 4 "$2/events" | sed -nE 's/.* step step=([0-9]+) .*/\1/p' | tail -n 1)
  else
    step=$(tail -n 4 "$2/A.log" | sed -nE 's/.*\] mgtrain: step ([0-9]+)\/.*/\1/p' | tail -n 1)
  fi
  echo "${step:-0}"
}
standby() {
  if [[ $1 == torchrun* ]]; then
    grep -q 'added itself to the redundancy list' "$2/C.log"
  else
    grep -q 'waits as a standby' "$2/C.log"
  fi
}
due() {  # training passed KILL_AFTER, at least KILL_OFFSET past a checkpoint
  local step
  step=$(last_step "$1" "$2")
  ((step >= kill_after && step % ckpt_every >= kill_offset))
}
resumed_step_seen() {  # a step of a worker started after the fault (trainer: a step line after round 1 started)
  if python_side "$1"; then
    awk -v fault="$fault" '
      $6 == "start" { split($7, t0, "="); if (t0[2] > fault) fresh[$3] = 1 }
      $6 == "step" && ($3 in fresh) { found = 1; exit }
      END { exit !found }' "$2/events"
  else
    awk '/mgtrain: round 1:/ { round1 = 1 } round1 && /\] mgtrain: step [0-9]+\// { found = 1; exit }
         END { exit !found }' "$2/A.log"
  fi
}
resumed_or_gone() { resumed_step_seen "$1" "$2" || ! { alive "${agent_pid[0]}" || alive "${agent_pid[2]}"; }; }

show_logs() {  # the end of every node's log, for a run that went wrong
  local dir=$1 name
  for name in A B C; do
    [[ -f $dir/$name.log ]] || continue
    echo "---- node $name (last 12 lines of $dir/$name.log)" >&2
    tail -n 12 "$dir/$name.log" | cut -c1-300 >&2
  done
}
end_run() {  # stops whatever is left of the run and waits for its agents (and their stampers)
  local i
  for i in 0 1 2; do kill_namespace "${hosts[i]}" || true; done
  wait 2>/dev/null || true
}

# figures SIDE DIR: "key=value ..." measured from the program's time stamps (see the header)
figures() {
  if python_side "$1"; then
    awk -v fault="$fault" '
      function value(field) { sub(/^[^=]*=/, "", field); return field }
      $6 == "start" { t0 = value($7) + 0; if (t0 > fault) { fresh[$3] = 1; if (start == "" || t0 < start) start = t0 } }
      $6 == "step" && !($3 in fresh) && $1 < fault { s = value($7) + 0; if (s > last) last = s }
      $6 == "step" && ($3 in fresh) && first == "" { first = $1 }
      $6 == "resumed" && ($3 in fresh) { r = value($7) + 0; if (resumed == "" || r < resumed) resumed = r
                                         l = value($8) + 0; if (l > load) load = l }
      END {
        printf "last_step=%d", last
        if (first != "") printf " first_step=%.3f worker_start=%.3f program=%.3f resumed=%d lost=%d load=%.4f",
                                first - fault, start - fault, first - start, resumed, last - resumed, load
      }' "$2/events"
  else
    awk -v fault="$fault" '
      /mgtrain: round 1:/ { round1 = 1 }
      !round1 && $1 < fault && match($0, /\] mgtrain: step [0-9]+\//) {
        s = substr($0, RSTART + 16, RLENGTH - 17) + 0; if (s > last) last = s }
      round1 && resumed == "" && match($0, /mgtrain: resumed from .*: step [0-9]+,/) {
        line = substr($0, RSTART, RLENGTH); sub(/.*: step /, "", line); resumed = line + 0
        if (match($0, /\([0-9.]+ s\)/)) load = substr($0, RSTART + 1, RLENGTH - 4) + 0 }
      round1 && first == "" && /\] mgtrain: step [0-9]+\// { first = $1 }
      END {
        printf "last_step=%d", last
        if (first != "") printf " first_step=%.3f resumed=%d lost=%d load=%.4f", first - fault, resumed,
                                (last > resumed ? last - resumed : 0), load
      }' "$2/A.log"
  fi
}

# phases SIDE DIR: the launcher's own account, seconds from the fault (see the header)
phases() {
  if [[ $1 == torchrun* ]]; then
    awk -v fault="$fault" '
      $1 > fault && detected == "" && /Worker group (FAILED|UNHEALTHY)|new nodes from group_rank/ { detected = $1 }
      $1 > fault && detected != "" && stopped == "" && /Rendezvous.ing worker group/ { stopped = $1 }
      $1 > fault && stopped != "" && rendezvous == "" && /has joined round [1-9][0-9]* of the rendezvous/ {
        rendezvous = $1 }
      END {
        if (detected != "") printf "own_detected=%.3f", detected - fault
        if (stopped != "") printf " own_stopped=%.3f", stopped - fault
        if (rendezvous != "") printf " own_rendezvous=%.3f", rendezvous - fault
      }' "$2/A.log"
    return
  fi
  local record=$2/logs/recovery/run.json
  [[ -f $record ]] || return 0
  awk -v fault="$fault" '  # run.json: the first "recovery" object (round 0s), its numbers
    { text = text $0 }
    END {
      if (!match(text, /"recovery": *\{[^}]*\}/)) exit
      r = substr(text, RSTART, RLENGTH); gsub(/[ {}"]/, "", r); sub(/^recovery:/, "", r)
      n = split(r, pairs, ",")
      for (i = 1; i <= n; i++) { split(pairs[i], kv, ":"); v[kv[1]] = kv[2] }
      if (v["fault"] == "" || v["fault"] == "null") exit
      offset = v["fault"] - fault
      printf "own_fault=%.3f", offset
      split("detected stopped rendezvous first_step", keys, " ")
      for (k = 1; k <= 4; k++) if (v[keys[k] "_s"] != "" && v[keys[k] "_s"] != "null")
        printf " own_%s=%.3f", keys[k], offset + v[keys[k] "_s"]
      split("last_step resumed_step steps_lost", keys, " ")
      for (k = 1; k <= 3; k++) if (v[keys[k]] != "" && v[keys[k]] != "null") printf " own_%s=%d", keys[k], v[keys[k]]
    }' "$record"
}

# run_once SIDE RUN_NUMBER: one run; appends its figures to $work/results (one line of key=value).
run_once() {
  local side=$1 n=$2
  local dir=$work/run$n-$side port=$((base_port + n - 1))
  mkdir -p "$dir/ckpt"
  : >"$dir/events"
  start_agent "$side" "$dir" "$port" 0
  start_agent "$side" "$dir" "$port" 1
  if ! wait_for "$start_timeout" trained "$side" "$dir"; then
    echo "recovery.sh: run $n ($side): nodes A and B did not start training within $start_timeout s" >&2
    show_logs "$dir"; end_run; exit 1
  fi
  start_agent "$side" "$dir" "$port" 2
  if ! wait_for "$start_timeout" standby "$side" "$dir"; then
    echo "recovery.sh: run $n ($side): node C did not say that it waits as a standby within $start_timeout s" >&2
    show_logs "$dir"; end_run; exit 1
  fi
  if ! wait_for "$start_timeout" due "$side" "$dir"; then
    echo "recovery.sh: run $n ($side): training did not reach a step >= $kill_after at least $kill_offset past a" \
      "checkpoint within $start_timeout s (at step $(last_step "$side" "$dir"))" >&2
    show_logs "$dir"; end_run; exit 1
  fi
  # The fault: node B dies (every process in its namespace, stopped at once, then killed).
  local pids
  pids=$("$ip" netns pids "${hosts[1]}")
  disown "${agent_pid[1]}"  # no "Killed" note from the shell: it is meant
  fault=$EPOCHREALTIME
  # shellcheck disable=SC2086  # one pid a word
  kill -STOP $pids
  # shellcheck disable=SC2086
  kill -KILL $pids
  kill_namespace "${hosts[1]}"
  local recovered=yes a_up=no c_up=no
  wait_for "$recover_timeout" resumed_or_gone "$side" "$dir" || true
  local gone=""
  if ! resumed_step_seen "$side" "$dir"; then
    recovered=no
    if ! alive "${agent_pid[0]}" && ! alive "${agent_pid[2]}"; then
      gone=$(awk -v n="$EPOCHREALTIME" -v f="$fault" 'BEGIN { printf " gone=%.1f", n - f }')
    fi
  fi
  ! alive "${agent_pid[0]}" || a_up=yes
  ! alive "${agent_pid[2]}" || c_up=yes
  # The end of the run: A's and C's agents exit by themselves once the resumed workers are done.
  local a_rc=- c_rc=- deadline=$((SECONDS + end_timeout))
  if [[ $recovered == yes ]]; then
    while { alive "${agent_pid[0]}" || alive "${agent_pid[2]}"; } && ((SECONDS < deadline)); do sleep 0.1; done
  fi
  if ! alive "${agent_pid[0]}"; then wait "${agent_pid[0]}" && a_rc=0 || a_rc=$?; fi
  if ! alive "${agent_pid[2]}"; then wait "${agent_pid[2]}" && c_rc=0 || c_rc=$?; fi
  end_run
  local line
  line="side=$side run=$n recovered=$recovered a_up=$a_up c_up=$c_up a_rc=$a_rc c_rc=$c_rc$gone"
  line+=" $(figures "$side" "$dir") $(phases "$side" "$dir")"
  echo "$line" >>"$work/results"
  echo "run $n: $line" >&2
  if [[ $recovered == no ]]; then
    echo "recovery.sh: run $n ($side) did not recover (within $recover_timeout s, or A's and C's agents exited); the" \
      "nodes' logs end:" >&2
    show_logs "$dir"
  fi
  if [[ $side != torchrun* ]]; then
    grep -h 'mgtrain: recovery from' "$dir/A.log" | cut -d' ' -f2- | sed 's/^/  A: /' >&2 || true
  fi
}

echo "machine: $(nproc) CPUs, $(uname -sr), torch $torch_version"
echo "nodes: network namespaces A ($subnet.1, hosts the rendezvous), B ($subnet.2, killed), C ($subnet.3, standby)"
: >"$work/results"
n=0
started=$SECONDS
for ((round = 1; round <= rounds; round++)); do
  this=("${order[@]}")
  if ((round % 2 == 0)); then
    this=()
    for ((k = ${#order[@]} - 1; k >= 0; k--)); do this+=("${order[k]}"); done
  fi
  for side in "${this[@]}"; do
    n=$((n + 1))
    echo "round $round/$rounds: $side ..." >&2
    run_once "$side" "$n"
  done
done

# ---- the table -----------------------------------------------------------------------------------------------------
# field SIDE KEY: the values of KEY over the side's runs that measured it, one a line
field() { awk -v side="$1" -v key="$2" '$1 == "side=" side {
  for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) print kv[2] } }' "$work/results"; }
median() {
  sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
count() { awk -v side="$1" -v pat="$2" '$1 == "side=" side && $0 ~ pat { n++ } END { print n + 0 }' "$work/results"; }
ratio_sides=()  # the torchrun sides, each with a ratio column against mgtrain (the same program)
if has mgtrain; then
  for side in "${order[@]}"; do [[ $side != torchrun* ]] || ratio_sides+=("$side"); done
fi

echo
echo "medians of $rounds runs per side, seconds from the fault (\"-\": not measured; \"recovered\": how many runs did)"
header=$(printf '%-54s' "measure")
for side in "${order[@]}"; do header+=$(printf ' %16s' "$side"); done
for side in "${ratio_sides[@]}"; do header+=$(printf ' %24s' "$side/mgtrain"); done
echo "$header"
row() {  # row LABEL KEY [PRINTF FORMAT WITHOUT THE % [no-ratio]]
  local label=$1 key=$2 fmt=${3:-.2f} line m t side
  line=$(printf '%-54s' "$label")
  for side in "${order[@]}"; do
    m=$(field "$side" "$key" | median)
    if [[ $m == - ]]; then line+=$(printf ' %16s' -); else line+=$(printf " %16$fmt" "$m"); fi
  done
  m=$(field mgtrain "$key" | median)
  for side in "${ratio_sides[@]}"; do
    t=$(field "$side" "$key" | median)
    if [[ -z ${4:-} && $m != - && $t != - ]] && awk -v m="$m" 'BEGIN { exit !(m > 0) }'; then
      line+=$(printf ' %23.1fx' "$(awk -v m="$m" -v t="$t" 'BEGIN { print t / m }')")
    else
      line+=$(printf ' %24s' -)
    fi
  done
  echo "$line"
}
counts() {  # counts LABEL PATTERN: how many runs of each side match
  local line side
  line=$(printf '%-54s' "$1")
  for side in "${order[@]}"; do line+=$(printf ' %16s' "$(count "$side" "$2") of $(count "$side" .)"); done
  echo "$line"
}
row "failure detected (launcher's log / run.json)" own_detected
row "workers stopped (launcher's log / run.json)" own_stopped
row "rendezvous complete (launcher's log / run.json)" own_rendezvous
row "first step (run.json: mgtrain's own figure)" own_first_step
row "new worker started (program's time stamp)" worker_start
row "first step after the fault (program's time stamp)" first_step
row "  of it the program's own start (python, torch, ...)" program .2f no-ratio
row "steps lost (last step before the fault - resumed)" lost .0f no-ratio
row "checkpoint load, s (program's own figure)" load .3f no-ratio
counts "recovered" 'recovered=yes'
row "not recovered: A's and C's agents both exited" gone .1f no-ratio
counts "A and C agents up at the first step after the fault" 'a_up=yes c_up=yes'
counts "A and C agents ended with exit code 0" 'a_rc=0 c_rc=0'
echo
echo "every run (seconds from the fault; own_*: the launcher's own account, see the header of this script):"
cat "$work/results"
echo "$n runs in $((SECONDS - started)) s"
[[ -z ${LOG_DIR:-} ]] || echo "logs: $work"
