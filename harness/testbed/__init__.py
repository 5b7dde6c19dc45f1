"""An emulated multi-host network on one machine, for multi-node runs without a cluster.

    ddlbench testbed up --hosts 2 --rate 500mbit   # namespaces ddlb-h0, ddlb-h1 on a shaped bridge
    ddlbench testbed measure                       # gloo all-reduce busbw between host 0 and 1
    ddlbench testbed down

netns.py builds and removes it, state.py says what it is (and persists it for launchers),
harness/commbench/testbed.py checks it with a real all-reduce. A launcher places rank r on host h with
`netns.host_command(h, argv)`, MASTER_ADDR=`netns.host_addr(0)`, GLOO_SOCKET_IFNAME=`state.hosts[h].ifname`.
"""

from harness.testbed.netns import down, host_addr, host_command, parse_rate, status, up
from harness.testbed.state import Host, TestbedState

__all__ = ["Host", "TestbedState", "down", "host_addr", "host_command", "parse_rate", "status", "up"]
