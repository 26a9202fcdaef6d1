#!/usr/bin/env bash
# A real SLURM cluster on this machine for mgtrain's SLURM layouts (docs/slurm.md): munged, slurmctld and
# two slurmd emulating the nodes node1 and node2 (`slurmd -N`), from Debian's packages, configured in a
# temporary directory — the machine's /etc/slurm is never touched. The script runs itself in a private
# mount namespace where /etc/hosts also names node1 and node2 (127.0.0.1), so the node names resolve
# for the jobs without changing the machine's file. Then:
#   (a) sbatch --wait scripts/slurm/cpu.sbatch: 2 nodes x 2 workers, one mgtrain launch per node (srun),
#       every launch setting detected from SLURM;
#   (b) scripts/slurm/task_per_rank.sbatch: srun starts 2 x 2 mgtrain-worker, no launcher;
#   (c) preemption: `scancel --signal=USR1 --full` during training -> the workers save a checkpoint and
#       exit 75 -> node 0's launcher runs `scontrol requeue` -> the rerun (SLURM_RESTART_COUNT=1) resumes
#       and ends with the same model parameters, bit for bit, as an uninterrupted job of the same config;
#   (d) a plain `scancel` (SIGTERM before the time limit) saves a checkpoint too but is NOT requeued.
# The daemons are stopped by their pids at the end, whatever happens (trap).
#
# Usage: tests/slurm/run_slurm_tests.sh BIN_DIR      (BIN_DIR holds mgtrain and mgtrain-worker)
# Exit 0 passed, 1 failed, 77 skipped (not root, packages missing, daemons cannot start: the reason is printed).
# Needs root and: apt-get install slurmctld slurmd slurm-client munge   (scripts/install-deps.sh --test)
# MGTRAIN_SLURM_TEST_KEEP=1 keeps the temporary directory (configs, daemon logs, job outputs).
set -uo pipefail

skip() { echo "SKIP: $*"; exit 77; }
say() { echo "slurm-test: $*"; }

bin_dir=$(cd "${1:?usage: $0 BIN_DIR (the directory with mgtrain and mgtrain-worker)}" && pwd) || exit 1
repo=$(cd "$(dirname "$0")/../.." && pwd)
[[ -x $bin_dir/mgtrain && -x $bin_dir/mgtrain-worker ]] || { echo "FAIL: no mgtrain and mgtrain-worker in $bin_dir"; exit 1; }

if [[ -z ${MGTRAIN_SLURM_TEST_INSIDE:-} ]]; then
  [[ $(id -u) -eq 0 ]] || skip "needs root (slurmd, munged and a private mount namespace)"
  for program in munged slurmctld slurmd sbatch srun scontrol scancel sinfo squeue unshare mount python3; do
    command -v "$program" >/dev/null ||
      skip "$program not found: apt-get install slurmctld slurmd slurm-client munge (scripts/install-deps.sh --test)"
  done
  unshare --mount --propagation private true 2>/dev/null || skip "cannot create a private mount namespace (unshare --mount)"
  MGTRAIN_SLURM_TEST_INSIDE=1 exec unshare --mount --propagation private "$0" "$@"
fi

# ---- inside the private mount namespace ----
work=$(mktemp -d "${TMPDIR:-/tmp}/mgtrain-slurm.XXXXXX") || exit 1
mkdir -p "$work"/{state,spool,log,a,b,c}
failed=0
daemon_pids=()

dump_logs() {
  for log in "$work"/log/*.log; do
    [[ -f $log ]] || continue
    echo "---- last lines of $log"
    tail -n 15 "$log"
  done
}

cleanup() {
  local status=$?
  if [[ -n ${SLURM_CONF:-} && ${#daemon_pids[@]} -gt 0 ]]; then
    # Jobs first (their slurmstepd and processes end with them), then the daemons, by pid.
    scancel --full --signal=KILL --user="$(id -un)" >/dev/null 2>&1
    scancel --user="$(id -un)" >/dev/null 2>&1
    for _ in $(seq 50); do [[ -z $(squeue -h 2>/dev/null) ]] && break; sleep 0.2; done
  fi
  for pid in "${daemon_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${daemon_pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  if [[ $status -ne 0 && $status -ne 77 ]] || [[ -n ${MGTRAIN_SLURM_TEST_KEEP:-} ]]; then
    echo "slurm-test: kept $work (configs, daemon logs in log/, job outputs in a/ b/ c/)"
  else
    rm -rf "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

check() {  # check DESCRIPTION COMMAND...: runs the command; a failure is reported and remembered
  local what=$1
  shift
  if "$@"; then
    say "ok: $what"
  else
    say "FAILED: $what"
    failed=1
  fi
}

# The emulated nodes' names resolve to this machine, in this namespace only.
{ echo "127.0.0.1 node1 node2"; cat /etc/hosts; } >"$work/hosts"
mount --bind "$work/hosts" /etc/hosts || skip "cannot bind-mount /etc/hosts in the private mount namespace"

if [[ ! -s /etc/munge/munge.key ]]; then
  say "creating /etc/munge/munge.key (munged needs a key)"
  mkdir -p /etc/munge && (umask 077 && head -c 1024 /dev/urandom >/etc/munge/munge.key) || skip "cannot create /etc/munge/munge.key"
fi

read -r ctld_port node1_port node2_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
# Job ids far apart between runs: the store port of a multi-node job is 20000 + job id % 20000.
first_job=$((1000 + RANDOM % 15000))

export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<EOF
# Written by tests/slurm/run_slurm_tests.sh: two emulated nodes on this machine.
ClusterName=mgtrain-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge.socket,cred_expire=10
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
SlurmdParameters=config_overrides
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.%n.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.%n.log
ReturnToService=2
JobRequeue=1
FirstJobId=$first_job
KillWait=5
MinJobAge=600
InactiveLimit=0
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=node1 NodeHostname=node1 NodeAddr=127.0.0.1 Port=$node1_port CPUs=4 RealMemory=1000 State=UNKNOWN
NodeName=node2 NodeHostname=node2 NodeAddr=127.0.0.1 Port=$node2_port CPUs=4 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

started=$(date +%s)
wait_for_pid_file() {  # wait_for_pid_file FILE: its pid once the daemon wrote it
  for _ in $(seq 100); do
    if [[ -s $1 ]]; then
      cat "$1"
      return 0
    fi
    sleep 0.1
  done
  return 1
}
munged --socket="$work/munge.socket" --pid-file="$work/munged.pid" --log-file="$work/log/munged.log" \
  --seed-file="$work/munged.seed" --force || { dump_logs; skip "munged does not start"; }
pid=$(wait_for_pid_file "$work/munged.pid") || { dump_logs; skip "munged wrote no pid file"; }
daemon_pids+=("$pid")
slurmctld -i || { dump_logs; skip "slurmctld does not start"; }
pid=$(wait_for_pid_file "$work/slurmctld.pid") || { dump_logs; skip "slurmctld wrote no pid file"; }
daemon_pids+=("$pid")
for node in node1 node2; do
  slurmd -N "$node" || { dump_logs; skip "slurmd -N $node does not start"; }
  pid=$(wait_for_pid_file "$work/slurmd.$node.pid") || { dump_logs; skip "slurmd -N $node wrote no pid file"; }
  daemon_pids+=("$pid")
done
idle=0
for _ in $(seq 60); do
  if [[ $(sinfo -h -o '%T %D' 2>/dev/null) == "idle 2" ]]; then
    idle=1
    break
  fi
  sleep 0.5
done
[[ $idle -eq 1 ]] || { sinfo; dump_logs; skip "the emulated nodes did not become idle within 30 s"; }
say "cluster up in $(($(date +%s) - started)) s: $(sinfo -h -o '%P %D nodes %T %N')"

export PATH=$bin_dir:$PATH  # sbatch passes the environment on: the job scripts find mgtrain there

# A tiny synthetic job: 512 samples, batches of 16 per rank.
cat >"$work/tiny.yaml" <<'EOF'
model: {type: mlp, hidden_sizes: [32]}
data: {dataset: synthetic, input_shape: [16], num_classes: 4, synthetic_samples: 512, loader_threads: 0}
train: {epochs: 1, batch_size: 16, eval_at_epoch_end: false}
ddp: {connect_timeout_s: 60}
log: {every_steps: 4}
checkpoint: {every_epochs: 0}
EOF
# Long enough to be interrupted: checkpoints every 40 steps (all kept: when the two runs end apart, compare_models
# names the first step at which they differ), progress every 20.
cat >"$work/preempt.yaml" <<'EOF'
model: {type: mlp, hidden_sizes: [256, 256]}
data: {dataset: synthetic, input_shape: [128], num_classes: 8, synthetic_samples: 40000, loader_threads: 0}
train: {max_steps: 1000, batch_size: 32, eval_at_epoch_end: false}
optim: {name: adam, lr: 0.001}
ddp: {connect_timeout_s: 60}
log: {every_steps: 20}
checkpoint: {every_steps: 40, every_epochs: 0, keep_last: 40}
EOF

job_field() {  # job_field JOB KEY: a field of `scontrol show job`
  scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}
contains() {  # contains FILE TEXT
  grep -qF -- "$2" "$1" || { echo "    '$2' not in $1:"; sed 's/^/    | /' "$1" | tail -n 30; return 1; }
}

# ---- (c) starts first: the reference and the job to preempt, signalled, run while (a) and (b) do ------
cd "$work/c" || exit 1
reference=$(sbatch --parsable --nodes=2 --cpus-per-task=1 --output="$work/c/reference.out" \
  "$repo/scripts/slurm/cpu.sbatch" "$work/preempt.yaml") || { echo "FAIL: sbatch"; exit 1; }
preempted=$(sbatch --parsable --nodes=2 --cpus-per-task=1 --output="$work/c/preempted.out" \
  "$repo/scripts/slurm/cpu.sbatch" "$work/preempt.yaml") || { echo "FAIL: sbatch"; exit 1; }
cancelled=$(sbatch --parsable --nodes=2 --cpus-per-task=1 --output="$work/c/cancelled.out" \
  "$repo/scripts/slurm/cpu.sbatch" "$work/preempt.yaml") || { echo "FAIL: sbatch"; exit 1; }
say "(c) jobs $reference (uninterrupted) and $preempted (to preempt) submitted; (d) job $cancelled (to scancel)"
# Preempt it once it has trained past its first checkpoint; it requeues and reruns while (a) and (b) go on.
reached=0
for _ in $(seq 600); do
  step=$(grep -oE 'mgtrain: step [0-9]+/' "$work/c/preempted.out" 2>/dev/null | tail -n 1 | grep -oE '[0-9]+')
  if [[ -n $step && $step -ge 60 ]]; then
    reached=1
    break
  fi
  case $(job_field "$preempted" JobState) in COMPLETED | FAILED | CANCELLED) break ;; esac
  sleep 0.2
done
if [[ $reached -ne 1 ]]; then
  say "FAILED: (c) job $preempted did not reach step 60 (state $(job_field "$preempted" JobState))"
  sed 's/^/    | /' "$work/c/preempted.out" | tail -n 30
  exit 1
fi
say "(c) job $preempted at step $step: scancel --signal=USR1 --full"
scancel --signal=USR1 --full "$preempted"
t_signal=$(date +%s)
# (d) the same for a plain scancel, once that job trains too.
for _ in $(seq 600); do
  step=$(grep -oE 'mgtrain: step [0-9]+/' "$work/c/cancelled.out" 2>/dev/null | tail -n 1 | grep -oE '[0-9]+')
  [[ -n $step && $step -ge 20 ]] && break
  case $(job_field "$cancelled" JobState) in COMPLETED | FAILED | CANCELLED) break ;; esac
  sleep 0.2
done
say "(d) job $cancelled at step ${step:-none}: scancel"
scancel "$cancelled"

# ---- (a) one launcher per node, 2 nodes x 2 workers -------------------------------------------------
cd "$work/a" || exit 1
t0=$(date +%s)
sbatch --wait --nodes=2 --cpus-per-task=2 --output="$work/a/job.out" \
  "$repo/scripts/slurm/cpu.sbatch" "$work/tiny.yaml" launch.nproc=2 >"$work/a/sbatch.txt" 2>&1
status=$?
job_a=$(grep -oE '[0-9]+' "$work/a/sbatch.txt" | head -n 1)
say "(a) job $job_a: sbatch --wait cpu.sbatch exited $status after $(($(date +%s) - t0)) s"
check "(a) the job succeeded" test "$status" -eq 0
check "(a) node 0 took its settings from SLURM" contains "$work/a/job.out" \
  "mgtrain: SLURM job $job_a: node 0 of 2 (SLURM_NODEID, SLURM_STEP_NUM_NODES), master node1:$((20000 + job_a % 20000)) (SLURM_STEP_NODELIST, SLURM_JOB_ID), 2 workers (given), run id slurm-$job_a (SLURM_JOB_ID)"
check "(a) node 1 too" contains "$work/a/job.out" "mgtrain: SLURM job $job_a: node 1 of 2"
check "(a) 4 ranks trained" contains "$work/a/job.out" "x 4 ranks"
check "(a) rank 0 printed the summary" contains "$work/a/job.out" '[rank 0] {"summary"'
check "(a) the rendezvous was authenticated with the token derived from the job" contains "$work/a/job.out" \
  "the rendezvous is authenticated with the token from SLURM job $job_a and "

# ---- (b) one task per rank, no launcher --------------------------------------------------------------
cd "$work/b" || exit 1
t0=$(date +%s)
sbatch --wait --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 --output="$work/b/job.out" \
  "$repo/scripts/slurm/task_per_rank.sbatch" "$work/tiny.yaml" >"$work/b/sbatch.txt" 2>&1
status=$?
job_b=$(grep -oE '[0-9]+' "$work/b/sbatch.txt" | head -n 1)
say "(b) job $job_b: sbatch --wait task_per_rank.sbatch exited $status after $(($(date +%s) - t0)) s"
check "(b) the job succeeded" test "$status" -eq 0
check "(b) 4 ranks trained" contains "$work/b/job.out" "x 4 ranks"
check "(b) rank 0 printed the summary" contains "$work/b/job.out" '{"summary"'
check "(b) the run id is the job's" test -d "$work/b/runs/slurm-$job_b"

# ---- (c) preemption -> checkpoint -> requeue -> resume: the outcome --------------------------------
cd "$work/c" || exit 1
for _ in $(seq 900); do
  state=$(job_field "$preempted" JobState)
  restarts=$(job_field "$preempted" Restarts)
  # Over: after its rerun, or without one (the requeue would have happened before the job could end).
  [[ $state == COMPLETED || $state == FAILED || $state == CANCELLED ]] && break
  sleep 0.2
done
say "(c) job $preempted: $state after $restarts restart(s), $(($(date +%s) - t_signal)) s after the signal"
for _ in $(seq 600); do
  ref_state=$(job_field "$reference" JobState)
  [[ $ref_state == COMPLETED || $ref_state == FAILED || $ref_state == CANCELLED ]] && break
  sleep 0.2
done
check "(c) the uninterrupted job completed" test "$ref_state" = COMPLETED
check "(c) the preempted job was requeued once and completed" test "$state/$restarts" = "COMPLETED/1"
check "(c) the workers saved and stopped on SIGUSR1" contains "$work/c/preempted.out" "saved a checkpoint at step"
check "(c) node 0's launcher requeued the job" contains "$work/c/preempted.out" \
  "mgtrain: requeueing SLURM job $preempted (scontrol requeue $preempted)"
check "(c) the rerun knew it was one" contains "$work/c/preempted.out" \
  "mgtrain: SLURM_RESTART_COUNT=1: job $preempted was requeued and this is a rerun of run slurm-$preempted"
check "(c) the rerun resumed from the checkpoint" contains "$work/c/preempted.out" "mgtrain: resumed from"
check "(c) and finished" contains "$work/c/preempted.out" "mgtrain: step 1000/1000"
# ---- (d) scancel: SIGTERM before the time limit, no requeue ------------------------------------------
for _ in $(seq 300); do
  cancelled_state=$(job_field "$cancelled" JobState)
  [[ $cancelled_state == CANCELLED || $cancelled_state == COMPLETED || $cancelled_state == FAILED ]] && break
  sleep 0.2
done
check "(d) the cancelled job stayed cancelled" test "$cancelled_state/$(job_field "$cancelled" Restarts)" = "CANCELLED/0"
check "(d) node 0's launcher said why it did not requeue" contains "$work/c/cancelled.out" \
  "mgtrain: SLURM job $cancelled is not requeued: "

# The newest checkpoint of each run (its `latest` pointer): the model tensors must be identical.
compare_models() {
  python3 - "$work/c/runs/slurm-$reference/checkpoints" "$work/c/runs/slurm-$preempted/checkpoints" <<'EOF'
import json, os, struct, sys

def model_tensors(directory, name=None):
    if name is None:
        with open(os.path.join(directory, "latest")) as f:
            name = f.read().strip()
    with open(os.path.join(directory, name), "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    base = 8 + length
    meta = header.get("__metadata__", {})
    tensors = {k: blob[base + v["data_offsets"][0]:base + v["data_offsets"][1]]
               for k, v in header.items() if k.startswith("model/")}
    return name, meta.get("mgtrain.step"), tensors

a, b = (model_tensors(d) for d in sys.argv[1:3])
print(f"    uninterrupted: {a[0]} (step {a[1]}, {len(a[2])} model tensors); preempted: {b[0]} (step {b[1]}, {len(b[2])})")
if a[1] != b[1] or not a[2] or a[2].keys() != b[2].keys():
    sys.exit("    different steps or tensor names")
different = [k for k in a[2] if a[2][k] != b[2][k]]
if different:
    # Where the two runs part: the first checkpoint both kept whose model differs.
    both = sorted(set(os.listdir(sys.argv[1])) & set(os.listdir(sys.argv[2])))
    for name in (n for n in both if n.startswith("checkpoint-") and n.endswith(".safetensors")):
        x, y = (model_tensors(d, name)[2] for d in sys.argv[1:3])
        if x != y:
            print(f"    the first checkpoint both runs wrote that differs: {name}")
            break
    sys.exit(f"    different values in {different}")
EOF
}
check "(c) the resumed run ends with the uninterrupted run's parameters, bit for bit" compare_models

say "done in $(($(date +%s) - started)) s"
if [[ $failed -ne 0 ]]; then
  dump_logs
  exit 1
fi
exit 0
