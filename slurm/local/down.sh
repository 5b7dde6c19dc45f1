#!/usr/bin/env bash
# Tear down the local Slurm cluster made by slurm/local/up.sh: cancel jobs, end the daemons and job
# processes it started, and remove every file it wrote. Idempotent; safe after a failed or partial up.
#
#   sudo slurm/local/down.sh [--quiet]
#
# Processes are ended by pid, found from what ties them to this cluster only: the pid files and
# config path of our daemons, SLURM_CLUSTER_NAME=ddlbench-local in a job's environment, and a
# slurmstepd working in our spool directory. A munged that up.sh did not start is left alone.
# The installed Debian packages stay (reinstalling is the slow part of up.sh).
set -uo pipefail

QUIET=""
[ "${1:-}" = "--quiet" ] && QUIET=1
log() { [ -n "$QUIET" ] || echo "down.sh: $*"; }

if [ "$(id -u)" != 0 ]; then
  echo "down.sh: needs root (it ends daemons running as root); rerun with sudo" >&2; exit 2
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/cluster-common.sh"

CONF=/etc/slurm/slurm.conf
STATE=/var/spool/ddlbench-slurm
MARK="# Written by ddlbench slurm/local/up.sh"
CLUSTER=ddlbench-local
OURS_CONF=""
grep -qxF "$MARK" "$CONF" 2>/dev/null && OURS_CONF=1

# 1. Let Slurm end the jobs itself when the controller still answers (tasks get SIGTERM, then KILL).
cancel_all_jobs "$OURS_CONF"

# 2. Find what is left, by pid (never this shell or its parents: cluster-common.sh).
our_pids() {
  local f pid
  {
    # Our daemons: slurmctld/slurmd name our config file, munged our state dir, on their command line.
    for f in $(grep -lzxF -e "$CONF" /proc/[0-9]*/cmdline 2>/dev/null) \
             $(grep -lzF -e "$STATE/" /proc/[0-9]*/cmdline 2>/dev/null); do
      pid=$(pid_of "$f")
      case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in
        */slurmctld*|*/slurmd*|*/munged) echo "$pid" ;;
      esac
    done
    # Step daemons of our slurmd work in, and log to, our spool directory.
    for f in $(ls -l /proc/[0-9]*/exe 2>/dev/null | grep -o '/proc/[0-9]*/exe -> .*slurmstepd.*'); do
      case "$f" in /proc/*) ;; *) continue ;; esac
      pid=$(pid_of "$f")
      if case "$(readlink "/proc/$pid/cwd" 2>/dev/null)" in "$STATE"/*) true ;; *) false ;; esac \
         || ls -l "/proc/$pid/fd" 2>/dev/null | grep -qF " $STATE/"; then
        echo "$pid"
      fi
    done
    # Job tasks carry the cluster's name in their environment.
    for f in $(grep -lzxF -e "SLURM_CLUSTER_NAME=$CLUSTER" /proc/[0-9]*/environ 2>/dev/null); do
      pid_of "$f"
    done
  } | sort -un | not_ancestor
}
# A zombie has exited already: only its parent can remove it, and here that parent may never do so.
running() { local s; s=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [ -n "$s" ] && [ "$s" != Z ]; }
pids=$(our_pids | tr '\n' ' ')
if [ -n "${pids// /}" ]; then
  log "ending processes: $pids"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  # A second is plenty: slurmstepd and srun ignore SIGTERM once their peers are gone, and nothing
  # here needs a graceful end.
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
  # Anything a dying stepd left or forked meanwhile.
  late=$(our_pids | tr '\n' ' ')
  # shellcheck disable=SC2086
  [ -z "${late// /}" ] || kill -KILL $late 2>/dev/null || true
fi

# 3. Files. The munge key and /run/munge only if up.sh made them (the package normally does).
if [ -e "$STATE/run/munge-key-created" ]; then rm -f /etc/munge/munge.key; fi
if [ -e "$STATE/run/munge-rundir-created" ]; then rm -rf /run/munge; fi
if [ -e "$STATE/run/munged-started" ]; then rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock; fi
[ -n "$OURS_CONF" ] && rm -f "$CONF"
rm -rf "$STATE"
log "local Slurm is down; nothing of it is left running"
exit 0
