# Three "nodes" on one machine for the multi-node benchmarks (sourced by recovery.sh and recovery_campaign.sh): Linux
# network namespaces A, B and C on a bridge (as tests/integration/netns_hosts.cpp makes them), addresses $subnet.1-3,
# each with its own ports. The sourcing script sets `subnet`, `name` (its name, for messages) and defines `die`.
#   make_nodes TAG       makes the bridge and the three namespaces: hosts[0..2] are their names
#   kill_namespace NS    SIGSTOP, then SIGKILL every process in it, until none is left (5 s at most)
#   remove_nodes         kills everything in the namespaces and deletes them (the EXIT trap's part)
#   wait_for SECONDS COMMAND...   polls COMMAND every 50 ms until it succeeds (0) or SECONDS have passed (1)
#   alive PID            running (a child that exited stays a zombie until waited for: not alive)
#   stamp                prefixes each line of stdin with the wall clock ($EPOCHREALTIME)
ip=$(command -v ip || true)
hosts=()
made=()
tag=""

kill_namespace() {
  local pids deadline=$((SECONDS + 5))
  while pids=$("$ip" netns pids "$1" 2>/dev/null) && [[ -n $pids ]]; do
    # shellcheck disable=SC2086  # one pid a word
    kill -STOP $pids 2>/dev/null || true
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    ((SECONDS < deadline)) || { echo "$name: processes left in namespace $1: $pids" >&2; return 1; }
    sleep 0.05
  done
}

remove_nodes() {
  local ns i
  for ns in "${made[@]}"; do kill_namespace "$ns" || true; done
  for ns in "${made[@]}"; do "$ip" netns del "$ns" 2>/dev/null || true; done
  for i in 0 1 2; do  # a veth pair left outside the namespaces by a setup that failed half-way
    "$ip" link del "${tag}a$i" 2>/dev/null || true
    "$ip" link del "${tag}b$i" 2>/dev/null || true
  done
}

netns() {  # netns ARGS: runs `ip ARGS`, or refuses with what it said
  local out
  out=$("$ip" "$@" 2>&1) || die "ip $* failed: $out (network namespaces are not usable here)"
}

make_nodes() {
  ((EUID == 0)) || die "network namespaces need root (ip netns add): run it as root"
  [[ -n $ip ]] || die "the ip tool (iproute2) is not installed: apt-get install iproute2"
  [[ $subnet =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "SUBNET=$subnet: expected three octets, e.g. 10.79.0"
  tag=$1
  local switch=${tag}sw i
  hosts=("${tag}h0" "${tag}h1" "${tag}h2")
  netns netns add "$switch"
  made+=("$switch")
  netns -n "$switch" link add br0 type bridge
  netns -n "$switch" link set br0 up
  for i in 0 1 2; do
    netns netns add "${hosts[i]}"
    made+=("${hosts[i]}")
    netns link add "${tag}b$i" type veth peer name "${tag}a$i"
    netns link set "${tag}b$i" netns "${hosts[i]}" name eth0
    netns link set "${tag}a$i" netns "$switch"
    netns -n "$switch" link set "${tag}a$i" master br0 up
    netns -n "${hosts[i]}" addr add "$subnet.$((i + 1))/24" dev eth0
    netns -n "${hosts[i]}" link set eth0 up
    netns -n "${hosts[i]}" link set lo up
  done
}

wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]]
}

# (Python: a bash read loop falls behind a worker that prints a line every millisecond.)
stamp() {
  python3 -u -c 'import sys, time
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(b"%.6f %s" % (time.time(), line))'
}
