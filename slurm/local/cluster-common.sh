#!/usr/bin/env bash
# What slurm/local/up.sh and up-netns.sh (and their down scripts) share: sourced, not run.

# The slurm.conf lines both local clusters write, after their own controller, ports and auth lines.
# Why (learned on Debian 12 containers without systemd, docs/ARCHITECTURE.md, "Testbed"): cgroup plugins
# fail here, and there is no accounting database.
slurm_conf_common() {   # $1: the cluster's state directory
  cat <<CONF
StateSaveLocation=$1/ctld
SlurmdSpoolDir=$1/d/%n
SlurmctldPidFile=$1/run/slurmctld.pid
SlurmdPidFile=$1/run/slurmd-%n.pid
SlurmctldLogFile=$1/log/slurmctld.log
SlurmdLogFile=$1/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
# Fast turnaround for tests: start batch jobs at submit time (the default batches them up for 3 s),
# short kill grace, keep finished jobs visible to scontrol for 10 minutes.
SchedulerParameters=batch_sched_delay=0
KillWait=2
MinJobAge=600
SlurmctldDebug=info
SlurmdDebug=info
CONF
}

# Ask the controller to end every job (tasks get SIGTERM, then KILL), when it still answers; wait a bit.
cancel_all_jobs() {   # $1: "1" when the configuration is ours
  [ -n "$1" ] && timeout 3 scontrol ping 2>/dev/null | grep -q 'is UP' || return 0
  local jobs
  jobs=$(timeout 5 squeue -h -o '%A' 2>/dev/null || true)
  [ -n "$jobs" ] || return 0
  log "cancelling jobs: $(echo $jobs)"
  # shellcheck disable=SC2086
  timeout 5 scancel $jobs 2>/dev/null || true
  for _ in $(seq 30); do [ -z "$(timeout 3 squeue -h -t R,CG -o '%A' 2>/dev/null)" ] && break; sleep 0.2; done
}

# This shell and its parents (never to be killed), and filters for pids found under /proc.
ancestors=" "
p=$$
while [ "$p" -gt 1 ] 2>/dev/null; do
  ancestors+="$p "
  p=$(awk '/^PPid:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 1)
done
not_ancestor() { while read -r pid; do case "$ancestors" in *" $pid "*) ;; *) echo "$pid" ;; esac; done; }
pid_of() { local p=${1#/proc/}; echo "${p%%/*}"; }
