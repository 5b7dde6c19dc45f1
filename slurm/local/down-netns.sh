#!/usr/bin/env bash
# Tear down the netns local Slurm made by slurm/local/up-netns.sh: cancel jobs, end its daemons and job
# processes, delete its namespaces and links, release the testbed lease it held, remove every file it
# wrote. Idempotent; safe after a failed or partial up.
#
#   sudo slurm/local/down-netns.sh [--quiet]
#
# Processes are ended by pid, found only from what ties them to this cluster: being inside one of its
# network namespaces (slurmd, slurmstepd, job tasks), its pid files (slurmctld, munged, the lease
# holder), its state directory on a daemon's command line, SLURM_CLUSTER_NAME=ddlbench-netns in a
# job's environment. The testbed (ddlb-*) and the plain local Slurm (slurm/local/up.sh) are not touched.
# The installed Debian packages stay.
set -uo pipefail

QUIET=""
[ "${1:-}" = "--quiet" ] && QUIET=1
log() { [ -n "$QUIET" ] || echo "down-netns.sh: $*"; }
if [ "$(id -u)" != 0 ]; then
  echo "down-netns.sh: needs root (it deletes network namespaces and ends daemons running as root); rerun with sudo" >&2; exit 2
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/netns-common.sh"
. "$HERE/cluster-common.sh"

OURS_CONF=""
grep -qxF "$MARK" "$CONF" 2>/dev/null && OURS_CONF=1
our_netns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NS_PREFIX-(node[0-9]+|sw)$"; }

# 1. Let Slurm end the jobs itself when the controller still answers (tasks get SIGTERM, then KILL).
cancel_all_jobs "$OURS_CONF"

# 2. Find what is left, by pid (never this shell or its parents: cluster-common.sh).
exe_of() { readlink "/proc/$1/exe" 2>/dev/null; }
our_pids() {
  local f pid ns
  {
    for ns in $(our_netns); do ip netns pids "$ns" 2>/dev/null; done
    for f in "$STATE/run/slurmctld.pid" "$STATE/munge/munged.pid"; do
      pid=$(cat "$f" 2>/dev/null) || continue
      case "$(exe_of "$pid")" in */slurmctld*|*/munged*) echo "$pid" ;; esac
    done
    # Daemons whose pid file is gone: they name our state directory on their command line.
    for f in $(grep -lzF -e "$STATE/" /proc/[0-9]*/cmdline 2>/dev/null); do
      pid=$(pid_of "$f")
      case "$(exe_of "$pid")" in */slurmctld*|*/slurmd*|*/slurmstepd*|*/munged*) echo "$pid" ;; esac
    done
    # The testbed-lease holder (flock and its sleep: a process group of their own, made by up-netns.sh).
    pid=$(cat "$STATE/run/lease.pid" 2>/dev/null) && case "$(exe_of "$pid")" in
      */flock) echo "$pid"; pgrep -g "$pid" 2>/dev/null ;;
    esac
    for f in $(grep -lzxF -e "SLURM_CLUSTER_NAME=$CLUSTER" /proc/[0-9]*/environ 2>/dev/null); do
      pid_of "$f"
    done
  } | grep -E '^[0-9]+$' | sort -un | not_ancestor
}
running() { local s; s=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [ -n "$s" ] && [ "$s" != Z ]; }
pids=$(our_pids | tr '\n' ' ')
if [ -n "${pids// /}" ]; then
  log "ending processes: $pids"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  alive=""
  for _ in $(seq 10); do
    alive=""
    for pid in $pids; do running "$pid" && alive+="$pid "; done
    [ -z "$alive" ] && break
    sleep 0.1
  done
  if [ -n "$alive" ]; then
    log "still alive after 1 s, killing: $alive"
    # shellcheck disable=SC2086
    kill -KILL $alive 2>/dev/null || true
  fi
  late=$(our_pids | tr '\n' ' ')
  # shellcheck disable=SC2086
  [ -z "${late// /}" ] || kill -KILL $late 2>/dev/null || true
fi

# 3. Namespaces (deleting dsl-sw deletes both bridges and every veth, the controller's leg included).
for ns in $(our_netns); do
  ip netns del "$ns" 2>/dev/null && log "deleted netns $ns"
done
if ip link show "$CTL_IF" >/dev/null 2>&1; then ip link del "$CTL_IF" 2>/dev/null && log "deleted link $CTL_IF"; fi

# 4. The lease file: removed if up-netns.sh created it, else emptied as the testbed does on release;
# either only when nobody holds it now.
if [ -e "$LEASE" ] && [ -d "$STATE/run" ]; then
  if [ -e "$STATE/run/lease-file-created" ]; then
    flock -n "$LEASE" rm -f "$LEASE" 2>/dev/null || true
  elif grep -q 'slurm/local/up-netns.sh' "$LEASE" 2>/dev/null; then
    flock -n "$LEASE" truncate -s 0 "$LEASE" 2>/dev/null || true
  fi
fi
rm -rf "$STATE"
log "netns local Slurm is down; nothing of it is left"
exit 0
