# Names, addresses, ports and paths of the netns local Slurm; sourced by up-netns.sh and down-netns.sh.
# Chosen apart from the testbed (ddlb-*, 10.77.0.0/24, /run/ddlbench-testbed.*) and from the plain local
# Slurm (/etc/slurm/slurm.conf, /var/spool/ddlbench-slurm, ports 16817 and 17000+i, cluster ddlbench-local).
# shellcheck shell=bash disable=SC2034
STATE=/var/spool/ddlbench-netns-slurm     # every file this cluster writes at run time
CONF=$STATE/slurm.conf
export SLURM_CONF=$CONF                   # Slurm's clients read it; users export it too
MARK="# Written by ddlbench slurm/local/up-netns.sh"
CLUSTER=ddlbench-netns                    # in every job's SLURM_CLUSTER_NAME
NS_PREFIX=dsl                             # namespaces dsl-node<i>, dsl-sw; links dsl-*
CTL_IF=$NS_PREFIX-ctl                     # the controller's leg in the root namespace
SLOW_SUBNET=10.77.1                       # private test ranges that exist only on these bridges
FAST_SUBNET=10.77.2
CTL_ADDR=$SLOW_SUBNET.254
CTLD_PORT=16917
SLURMD_PORT=16918                         # the same on every node, each on its own address
MUNGE_SOCKET=$STATE/munge/munge.socket
MUNGE_KEY=$STATE/munge/munge.key
LEASE=/run/ddlbench-testbed.lease         # harness/testbed/state.py LEASE_PATH
