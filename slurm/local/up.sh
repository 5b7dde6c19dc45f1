#!/usr/bin/env bash
# Stand up a real, single-host Slurm cluster with N fake nodes (n1..nN) for tests and demos.
#
#   sudo slurm/local/up.sh [--nodes N] [--cpus C]    # default: 2 nodes, CPUs per node = max(2, nproc)
#   sbatch --wrap hostname; scontrol show job <id>
#   sudo slurm/local/down.sh                         # kill daemons and remove every file written here
#
# Installs Debian's slurmctld, slurmd, slurm-client and munge with apt-get when missing. Writes
# /etc/slurm/slurm.conf (refuses to touch one it did not write) and keeps all state, logs and pid files
# under /var/spool/ddlbench-slurm. Idempotent: when the cluster is already up with the same shape it
# says so and exits 0; otherwise it tears down what is there and starts afresh.
#
# Why the settings below (learned on Debian 12 containers without systemd, see docs/ARCHITECTURE.md, "Launching"):
# cgroup plugins fail here, so proctrack/linuxproc + task/none + jobacct_gather/none; no accounting
# daemon, so job state comes from `scontrol show job`; several slurmd on one host each get their own
# port and `-N <name>`; munged must run as user munge.
set -euo pipefail

NODES=2
CPUS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES="${2:?--nodes needs a number}"; shift 2 ;;
    --nodes=*) NODES="${1#*=}"; shift ;;
    --cpus) CPUS="${2:?--cpus needs a number}"; shift 2 ;;
    --cpus=*) CPUS="${1#*=}"; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "up.sh: unknown argument '$1' (use --nodes N, --cpus C)" >&2; exit 2 ;;
  esac
done
case "$NODES" in ''|*[!0-9]*|0) echo "up.sh: --nodes must be a positive integer, got '$NODES'" >&2; exit 2 ;; esac
# Two CPUs per fake node even on a 1-core box, so that both "2 nodes x 1 task" and "1 node x 2 tasks"
# are schedulable; SlurmdParameters=config_overrides makes slurmd trust the configured count.
if [ -z "$CPUS" ]; then CPUS=$(nproc); [ "$CPUS" -ge 2 ] || CPUS=2; fi
case "$CPUS" in ''|*[!0-9]*|0) echo "up.sh: --cpus must be a positive integer, got '$CPUS'" >&2; exit 2 ;; esac

if [ "$(id -u)" != 0 ]; then
  echo "up.sh: needs root (it installs packages and starts daemons); rerun with sudo" >&2; exit 2
fi

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/cluster-common.sh"
CONF_DIR=/etc/slurm
CONF="$CONF_DIR/slurm.conf"
STATE=/var/spool/ddlbench-slurm          # everything we create at run time lives here
MARK="# Written by ddlbench slurm/local/up.sh"
CLUSTER=ddlbench-local                   # also in every job's SLURM_CLUSTER_NAME: down.sh uses it
CTLD_PORT=16817                          # away from the default 6817 of a real Slurm
NODE_PORT0=17000                         # node i listens on 17000+i
T0=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
log() { echo "up.sh: $*"; }

# ---- 1. packages --------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
   || ! command -v munged >/dev/null; then
  T_APT=$(date +%s.%N)
  log "installing slurmctld slurmd slurm-client munge with apt-get"
  # Package scripts would try to start the daemons (and slurmctld fails without a config): forbid
  # that during the install, the Debian way, unless the machine already does.
  POLICY_ADDED=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d
    POLICY_ADDED=1
  fi
  apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 \
      slurmctld slurmd slurm-client munge >"$1" 2>&1
  }
  APT_LOG=$(mktemp)
  if ! apt_install "$APT_LOG"; then
    apt-get update -q -o DPkg::Lock::Timeout=300 >/dev/null 2>&1 || true
    if ! apt_install "$APT_LOG"; then
      [ -z "$POLICY_ADDED" ] || rm -f /usr/sbin/policy-rc.d
      tail -n 20 "$APT_LOG" >&2
      echo "up.sh: apt-get could not install Slurm (see above); check network access to the Debian mirror" >&2
      exit 3
    fi
  fi
  [ -z "$POLICY_ADDED" ] || rm -f /usr/sbin/policy-rc.d
  rm -f "$APT_LOG"
  log "packages installed in $(elapsed "$T_APT") s"
fi
for u in munge slurm; do
  id "$u" >/dev/null 2>&1 || { echo "up.sh: user '$u' missing although its package is installed; reinstall munge/slurm-client" >&2; exit 3; }
done

# ---- 2. already up? ------------------------------------------------------------------------------
healthy() {
  # Our config, controller answering, and exactly $NODES nodes all usable.
  grep -qxF "$MARK" "$CONF" 2>/dev/null || return 1
  grep -qx "# nodes=$NODES cpus=$CPUS" "$CONF" || return 1
  timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP' || return 1
  local states; states=$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u) || return 1
  [ "$(echo "$states" | grep -cE ' (idle|mix|alloc|comp)$')" = "$NODES" ]
}
if healthy; then
  log "already up and healthy: $NODES nodes ($(sinfo -h -o '%D %t' | tr '\n' ' ')); nothing to do"
  exit 0
fi
if [ -e "$CONF" ] && ! grep -qxF "$MARK" "$CONF"; then
  echo "up.sh: $CONF exists and was not written by this script; refusing to overwrite a real Slurm config" >&2
  exit 2
fi
# Leftovers of an earlier or failed run (other shape, dead daemons): start from nothing.
if [ -e "$CONF" ] || [ -d "$STATE" ]; then
  log "a previous local cluster is present but not healthy or of another shape; tearing it down"
  "$HERE/down.sh" --quiet
fi

on_error() {
  echo "up.sh: failed after $(elapsed "$T0") s; last log lines:" >&2
  tail -n 5 "$STATE"/log/*.log 2>/dev/null >&2 || true
  echo "up.sh: run slurm/local/down.sh to clean up" >&2
}
trap on_error ERR

# ---- 3. munge ------------------------------------------------------------------------------------
mkdir -p "$STATE"/{ctld,log,run}
chown slurm:slurm "$STATE/ctld" "$STATE/log"
munge_works() { timeout 5 munge -n 2>/dev/null | timeout 5 unmunge >/dev/null 2>&1; }
if munge_works; then
  log "reusing the munged already running (not started here, so down.sh leaves it alone)"
else
  if [ ! -e /etc/munge/munge.key ]; then
    install -d -o munge -g munge -m 0700 /etc/munge
    runuser -u munge -- mungekey -c -k /etc/munge/munge.key
    touch "$STATE/run/munge-key-created"
  fi
  if [ ! -d /run/munge ]; then
    install -d -o munge -g munge -m 0755 /run/munge
    touch "$STATE/run/munge-rundir-created"
  fi
  install -d -o munge -g munge -m 0755 "$STATE/munge"
  # --force: a stale socket from a killed munged would otherwise stop it starting.
  runuser -u munge -- munged --force --pid-file="$STATE/munge/munged.pid"
  for _ in $(seq 50); do munge_works && break; sleep 0.1; done
  munge_works || { echo "up.sh: munged did not start; see /var/log/munge/munged.log" >&2; exit 3; }
  touch "$STATE/run/munged-started"
fi

# ---- 4. slurm.conf -------------------------------------------------------------------------------
CTLD_HOST=$(hostname -s)
mkdir -p "$CONF_DIR"
{
  echo "$MARK"
  echo "# nodes=$NODES cpus=$CPUS"
  echo "# Removed by slurm/local/down.sh. A single-host test cluster: do not use for anything real."
  cat <<CONF
ClusterName=$CLUSTER
SlurmctldHost=$CTLD_HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CONF
  slurm_conf_common "$STATE"
  for i in $(seq 1 "$NODES"); do
    echo "NodeName=n$i NodeAddr=127.0.0.1 NodeHostname=localhost Port=$((NODE_PORT0 + i)) CPUs=$CPUS State=UNKNOWN"
  done
  echo "PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} > "$CONF"
chmod 644 "$CONF"

# ---- 5. daemons ----------------------------------------------------------------------------------
slurmctld -c -f "$CONF"
for i in $(seq 1 "$NODES"); do
  mkdir -p "$STATE/d/n$i"
  slurmd -f "$CONF" -N "n$i"
done

# ---- 6. wait for idle nodes ----------------------------------------------------------------------
for _ in $(seq 600); do
  idle=$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | grep -c ' idle$' || true)
  [ "$idle" = "$NODES" ] && break
  sleep 0.1
done
if [ "$idle" != "$NODES" ]; then
  echo "up.sh: only $idle of $NODES nodes became idle within 60 s:" >&2
  sinfo -N >&2 || true
  false
fi
# Idle nodes are not yet proof: the controller makes its first scheduling pass of batch jobs a few
# seconds after start, and munge/slurmstepd problems only show when a step runs. So run a batch job
# with one step on every node and wait for it (polling scontrol: there is no accounting here).
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
  echo "up.sh: probe job $probe on all $NODES nodes ended as '${state:-unknown}' (want COMPLETED)" >&2
  false
fi
trap - ERR
log "probe job $probe (a step on n[1-$NODES]) completed in $(elapsed "$T_PROBE") s"
log "Slurm up: $NODES nodes x $CPUS CPUs idle, partition 'local', in $(elapsed "$T0") s"
