#!/usr/bin/env bash
# Stand up a local Slurm whose nodes look like real ones: each slurmd in its own network namespace with
# its own addresses on two shaped networks ("slow" and "fast"), its own hostname, and that hostname
# resolving to 127.0.1.1 inside the node, as on Debian/Ubuntu defaults (the trap of issue 17).
#
#   sudo slurm/local/up-netns.sh [--nodes N] [--cpus C] [--slow-rate R] [--fast-rate R]
#   export SLURM_CONF=/var/spool/ddlbench-netns-slurm/slurm.conf   # or: . /var/spool/ddlbench-netns-slurm/env
#   sbatch -N 2 --wrap 'srun hostname'; scontrol show job <id>
#   sudo slurm/local/down-netns.sh                                # ends everything, removes every trace
#
# Defaults: 2 nodes, slow 200mbit, fast 1gbit (tc units: mbit = 10^6 bit/s). Layout (N nodes, i = 1..N):
#
#   netns dsl-node<i>: lo; slow0 10.77.1.<i>/24; fast0 10.77.2.<i>/24; hostname node<i> -> 127.0.1.1
#   netns dsl-sw     : bridge dsl-slow (10.77.1.0/24), bridge dsl-fast (10.77.2.0/24), the veth peers
#   root netns       : dsl-ctl 10.77.1.254/24 on dsl-slow (slurmctld, and sbatch/scontrol of users)
#
# The slow network is the management network: NodeAddr, slurmctld and every Slurm RPC use it, and other
# nodes' names resolve to their slow address (as a site's DNS would). The fast network carries only what
# is told to use it (GLOO_SOCKET_IFNAME=fast0, ...). Every veth end carries tbf (burst 1mb, latency 50ms)
# at its network's rate, so each direction is shaped. Nothing here touches the testbed (`ddlbench
# testbed`, names ddlb-*, 10.77.0.0/24) or the plain local Slurm (slurm/local/up.sh: /etc/slurm,
# ports 16817/17000+i): names dsl-*, ports 16917 (slurmctld) and 16918 (every slurmd, on its own
# address), its own munged on its own socket, cluster name ddlbench-netns, all files under $STATE.
# While up, it holds the testbed's lease (/run/ddlbench-testbed.lease), so that `ddlbench testbed ...`
# runs are refused with a message naming this cluster instead of sharing the 2 cores with it; up-netns
# refuses to start while a testbed run holds that lease.
#
# Each slurmd runs under `nsenter --net=<netns>` (not `ip netns exec`, see docs/ARCHITECTURE.md, "Testbed") plus
# `unshare --mount --uts`: a private mount namespace in which /etc/hosts is a bind mount of the node's
# own hosts file and /sys is a sysfs of the node's network namespace (so /sys/class/net shows slow0,
# fast0 and lo, as on a real node; the host's /sys/fs/cgroup is moved back under it), and a UTS
# namespace with hostname node<i>. Job steps inherit all three.
set -euo pipefail

NODES=2
CPUS=""
SLOW_RATE=200mbit
FAST_RATE=1gbit
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES="${2:?--nodes needs a number}"; shift 2 ;;
    --nodes=*) NODES="${1#*=}"; shift ;;
    --cpus) CPUS="${2:?--cpus needs a number}"; shift 2 ;;
    --cpus=*) CPUS="${1#*=}"; shift ;;
    --slow-rate) SLOW_RATE="${2:?--slow-rate needs a rate, e.g. 200mbit}"; shift 2 ;;
    --slow-rate=*) SLOW_RATE="${1#*=}"; shift ;;
    --fast-rate) FAST_RATE="${2:?--fast-rate needs a rate, e.g. 1gbit}"; shift 2 ;;
    --fast-rate=*) FAST_RATE="${1#*=}"; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "up-netns.sh: unknown argument '$1' (use --nodes N, --cpus C, --slow-rate R, --fast-rate R)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "up-netns.sh: needs root (it creates network namespaces and starts daemons); rerun with sudo" >&2; exit 2
fi
case "$NODES" in ''|*[!0-9]*|0) echo "up-netns.sh: --nodes must be a positive integer, got '$NODES'" >&2; exit 2 ;; esac
[ "$NODES" -le 16 ] || { echo "up-netns.sh: --nodes $NODES is more than 16; 2 cores cannot carry more (use 2..16)" >&2; exit 2; }
if [ -z "$CPUS" ]; then CPUS=$(nproc); [ "$CPUS" -ge 2 ] || CPUS=2; fi
case "$CPUS" in ''|*[!0-9]*|0) echo "up-netns.sh: --cpus must be a positive integer, got '$CPUS'" >&2; exit 2 ;; esac
for r in "$SLOW_RATE" "$FAST_RATE"; do
  echo "$r" | grep -qiE '^[0-9]+(\.[0-9]+)?(kbit|mbit|gbit)$' \
    || { echo "up-netns.sh: rate '$r' is not a tc bit rate; write e.g. 200mbit or 1gbit (bps would mean bytes)" >&2; exit 2; }
done

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/netns-common.sh"
. "$HERE/cluster-common.sh"
T0=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
log() { echo "up-netns.sh: $*"; }
for tool in ip tc nsenter unshare flock; do
  command -v "$tool" >/dev/null || { echo "up-netns.sh: '$tool' is missing; apt-get install iproute2 util-linux" >&2; exit 2; }
done

# ---- 1. packages (the same Debian packages as slurm/local/up.sh) -------------------------------
"$HERE/install-slurm.sh" || exit 3

# ---- 2. already up? -----------------------------------------------------------------------------
SHAPE="# nodes=$NODES cpus=$CPUS slow=$SLOW_RATE fast=$FAST_RATE"
healthy() {
  grep -qxF "$MARK" "$CONF" 2>/dev/null && grep -qxF "$SHAPE" "$CONF" || return 1
  for i in $(seq 1 "$NODES"); do [ -e "/run/netns/$NS_PREFIX-node$i" ] || return 1; done
  lease_pid=$(cat "$STATE/run/lease.pid" 2>/dev/null) && kill -0 "$lease_pid" 2>/dev/null || return 1
  timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP' || return 1
  local states; states=$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u) || return 1
  [ "$(echo "$states" | grep -cE ' (idle|mix|alloc|comp)$')" = "$NODES" ]
}
if healthy; then
  log "already up and healthy: $NODES nodes ($(sinfo -h -o '%D %t' | tr '\n' ' ')); nothing to do"
  log "use it with: export SLURM_CONF=$CONF"
  exit 0
fi
if [ -e "$STATE" ] || ls /run/netns/"$NS_PREFIX"-* >/dev/null 2>&1 || ip link show "$CTL_IF" >/dev/null 2>&1; then
  log "a previous netns cluster is present but not healthy or of another shape; tearing it down"
  "$HERE/down-netns.sh" --quiet
fi

# ---- 3. the testbed's lease: one emulated network user per machine -----------------------------
mkdir -p "$STATE"/{ctld,log,run,hosts,d}
chmod 755 "$STATE"
[ -e "$LEASE" ] || touch "$STATE/run/lease-file-created"
# flock -n holds the lease for as long as the sleep runs (its own process group; down-netns.sh ends
# it); the sleep's shell says when the lock is taken. -E 75: someone else holds it.
setsid flock -n -E 75 "$LEASE" sh -c 'touch "$1"; exec sleep infinity' lease "$STATE/run/lease-held" \
  </dev/null >/dev/null 2>&1 &
LEASE_PID=$!
for _ in $(seq 100); do
  [ -e "$STATE/run/lease-held" ] || ! kill -0 "$LEASE_PID" 2>/dev/null && break
  sleep 0.1
done
if [ ! -e "$STATE/run/lease-held" ]; then
  kill "$LEASE_PID" 2>/dev/null || true
  holder=$(cat "$LEASE" 2>/dev/null || true)
  rm -rf "$STATE"
  echo "up-netns.sh: the emulated testbed is in use by ${holder:-another process}; both on 2 cores would distort each other's timings: wait for it, or stop it, and retry" >&2
  exit 2
fi
echo "$LEASE_PID" > "$STATE/run/lease.pid"
# What `ddlbench testbed ...` prints when refused (harness/testbed/netns.py reads the holder's text).
printf 'pid %s (the local Slurm of slurm/local/up-netns.sh; stop it with slurm/local/down-netns.sh)' "$LEASE_PID" > "$LEASE"

on_error() {
  echo "up-netns.sh: failed after $(elapsed "$T0") s; last log lines:" >&2
  tail -n 5 "$STATE"/log/*.log 2>/dev/null >&2 || true
  echo "up-netns.sh: run slurm/local/down-netns.sh to clean up" >&2
}
trap on_error ERR

# ---- 4. networks --------------------------------------------------------------------------------
tbf() { echo "root tbf rate $1 burst 1mb latency 50ms"; }   # the testbed's shaping (docs/ARCHITECTURE.md, "Testbed")
SW="$NS_PREFIX-sw"
ip netns add "$SW"
ip -n "$SW" link set lo up
for net in slow fast; do
  ip -n "$SW" link add "$NS_PREFIX-$net" type bridge
  ip -n "$SW" link set "$NS_PREFIX-$net" up
done
# The controller's leg, from the root namespace onto the slow (management) bridge; not shaped.
ip link add "$CTL_IF" type veth peer name "$NS_PREFIX-pctl" netns "$SW"
ip -n "$SW" link set "$NS_PREFIX-pctl" master "$NS_PREFIX-slow" up
ip addr add "$CTL_ADDR/24" dev "$CTL_IF"
ip link set "$CTL_IF" up
for i in $(seq 1 "$NODES"); do
  ns="$NS_PREFIX-node$i"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  for net in slow fast; do
    if [ "$net" = slow ]; then rate=$SLOW_RATE; sub=$SLOW_SUBNET; else rate=$FAST_RATE; sub=$FAST_SUBNET; fi
    port="$NS_PREFIX-${net:0:1}$i"
    # Both ends are created in their namespaces: nothing of a node appears in the root namespace.
    ip -n "$SW" link add "$port" type veth peer name "${net}0" netns "$ns"
    ip -n "$SW" link set "$port" master "$NS_PREFIX-$net"
    ip -n "$ns" addr add "$sub.$i/24" dev "${net}0"
    # shellcheck disable=SC2046
    tc -n "$ns" qdisc replace dev "${net}0" $(tbf "$rate")      # node -> switch
    # shellcheck disable=SC2046
    tc -n "$SW" qdisc replace dev "$port" $(tbf "$rate")        # switch -> node
    ip -n "$SW" link set "$port" up
    ip -n "$ns" link set "${net}0" up
  done
done
log "networks: slow $SLOW_SUBNET.0/24 at $SLOW_RATE, fast $FAST_SUBNET.0/24 at $FAST_RATE, controller $CTL_ADDR"

# ---- 5. munge: our own daemon, key and socket (the plain local Slurm may start and stop its own) ---
install -d -o munge -g munge -m 0755 "$STATE/munge"
runuser -u munge -- mungekey -c -k "$MUNGE_KEY"
runuser -u munge -- munged --force --socket="$MUNGE_SOCKET" --key-file="$MUNGE_KEY" \
  --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/munge/munged.log" --seed-file="$STATE/munge/munged.seed"
munge_works() { timeout 5 munge -S "$MUNGE_SOCKET" -n 2>/dev/null | timeout 5 unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1; }
for _ in $(seq 50); do munge_works && break; sleep 0.1; done
munge_works || { echo "up-netns.sh: munged did not start; see $STATE/munge/munged.log" >&2; false; }

# ---- 6. slurm.conf, hosts files, a description for launchers and tests ---------------------------
chown slurm:slurm "$STATE/ctld" "$STATE/log"
CTLD_HOST=$(hostname -s)   # slurmctld insists on running on a host named in SlurmctldHost
{
  echo "$MARK"
  echo "$SHAPE"
  echo "# Removed by slurm/local/down-netns.sh. A single-host test cluster: do not use for anything real."
  cat <<CONF
ClusterName=$CLUSTER
SlurmctldHost=$CTLD_HOST($CTL_ADDR)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
CONF
  slurm_conf_common "$STATE"
  for i in $(seq 1 "$NODES"); do
    echo "NodeName=node$i NodeAddr=$SLOW_SUBNET.$i NodeHostname=node$i CPUs=$CPUS State=UNKNOWN"
  done
  echo "PartitionName=netns Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} > "$CONF"
chmod 644 "$CONF"
echo "export SLURM_CONF=$CONF" > "$STATE/env"
for i in $(seq 1 "$NODES"); do
  # Debian's default: the own name on 127.0.1.1; the other nodes as a site's DNS would give them
  # (their management address).
  {
    printf '127.0.0.1\tlocalhost\n127.0.1.1\tnode%s\n' "$i"
    for j in $(seq 1 "$NODES"); do [ "$j" = "$i" ] || printf '%s.%s\tnode%s\n' "$SLOW_SUBNET" "$j" "$j"; done
    printf '::1\tlocalhost ip6-localhost ip6-loopback\n'
  } > "$STATE/hosts/node$i"
  chmod 644 "$STATE/hosts/node$i"
done
python3 - "$NODES" "$SLOW_RATE" "$FAST_RATE" > "$STATE/cluster.json" <<PY
import json, sys
n, slow, fast = int(sys.argv[1]), sys.argv[2], sys.argv[3]
print(json.dumps({
    "cluster": "$CLUSTER", "slurm_conf": "$CONF", "management_network": "slow",
    "controller": {"addr": "$CTL_ADDR", "port": $CTLD_PORT, "iface_root_netns": "$CTL_IF"},
    "networks": {"slow": {"iface": "slow0", "subnet": "$SLOW_SUBNET.0/24", "rate": slow},
                 "fast": {"iface": "fast0", "subnet": "$FAST_SUBNET.0/24", "rate": fast}},
    "nodes": [{"name": f"node{i}", "netns": f"$NS_PREFIX-node{i}", "netns_path": f"/run/netns/$NS_PREFIX-node{i}",
               "hostname_addr": "127.0.1.1",
               "addrs": {"slow": f"$SLOW_SUBNET.{i}", "fast": f"$FAST_SUBNET.{i}"}} for i in range(1, n + 1)],
}, indent=2))
PY

# ---- 7. daemons -----------------------------------------------------------------------------------
slurmctld -c -f "$CONF"
for i in $(seq 1 "$NODES"); do
  mkdir -p "$STATE/d/node$i" "$STATE/run/cg-node$i"
  # In the node's own mount namespace: its hosts file, a sysfs of its network namespace (keeping the
  # host's cgroup tree under it), its hostname; then slurmd, which daemonizes and stays in all three.
  nsenter --net="/run/netns/$NS_PREFIX-node$i" -- unshare --mount --uts --propagation private -- /bin/sh -ec '
    hosts=$1; cg=$2; node=$3; conf=$4
    mount --bind "$hosts" /etc/hosts
    if mountpoint -q /sys/fs/cgroup; then mount --rbind /sys/fs/cgroup "$cg"; fi
    mount -t sysfs sysfs /sys
    if mountpoint -q "$cg"; then mount --move "$cg" /sys/fs/cgroup; fi
    hostname "$node"
    exec slurmd -f "$conf" -N "$node"
  ' up-netns "$STATE/hosts/node$i" "$STATE/run/cg-node$i" "node$i" "$CONF"
done

# ---- 8. wait for idle nodes, then a probe job with a step on every node (as slurm/local/up.sh) ----
idle=0
for _ in $(seq 600); do
  idle=$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | grep -c ' idle$' || true)
  [ "$idle" = "$NODES" ] && break
  sleep 0.1
done
if [ "$idle" != "$NODES" ]; then
  echo "up-netns.sh: only $idle of $NODES nodes became idle within 60 s:" >&2
  sinfo -N >&2 || true
  false
fi
T_PROBE=$(date +%s.%N)
probe=$(sbatch --parsable --job-name=ddlbench-up-probe --nodes="$NODES" --ntasks-per-node=1 --time=1 \
  --output=/dev/null --wrap="srun true")
state=""
for _ in $(seq 600); do
  state=$(scontrol show job "$probe" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL) break ;; esac
  sleep 0.1
done
if [ "$state" != COMPLETED ]; then
  echo "up-netns.sh: probe job $probe on all $NODES nodes ended as '${state:-unknown}' (want COMPLETED)" >&2
  false
fi
trap - ERR
log "probe job $probe (a step on node[1-$NODES]) completed in $(elapsed "$T_PROBE") s"
log "Slurm up: $NODES nodes x $CPUS CPUs idle, partition 'netns', in $(elapsed "$T0") s"
log "use it with: export SLURM_CONF=$CONF   (layout: $STATE/cluster.json)"
