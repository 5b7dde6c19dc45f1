#!/usr/bin/env bash
# Install Debian's slurmctld, slurmd, slurm-client and munge when missing (exit 3 when apt-get cannot).
# Used by up-netns.sh; the same steps as the package section of up.sh.
set -euo pipefail
have() { command -v slurmctld && command -v slurmd && command -v sbatch && command -v munged; } >/dev/null
if ! have; then
  echo "install-slurm.sh: installing slurmctld slurmd slurm-client munge with apt-get"
  # Package scripts would try to start the daemons (slurmctld fails without a config): forbid that
  # during the install, the Debian way, unless the machine already does.
  POLICY_ADDED=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; POLICY_ADDED=1
  fi
  apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 \
      slurmctld slurmd slurm-client munge >"$1" 2>&1
  }
  APT_LOG=$(mktemp)
  ok=1
  if ! apt_install "$APT_LOG"; then
    apt-get update -q -o DPkg::Lock::Timeout=300 >/dev/null 2>&1 || true
    apt_install "$APT_LOG" || ok=""
  fi
  [ -z "$POLICY_ADDED" ] || rm -f /usr/sbin/policy-rc.d
  if [ -z "$ok" ]; then
    tail -n 20 "$APT_LOG" >&2; rm -f "$APT_LOG"
    echo "install-slurm.sh: apt-get could not install Slurm (see above); check access to the Debian mirror" >&2
    exit 3
  fi
  rm -f "$APT_LOG"
fi
for u in munge slurm; do
  id "$u" >/dev/null 2>&1 || { echo "install-slurm.sh: user '$u' missing although its package is installed; reinstall munge/slurm-client" >&2; exit 3; }
done
