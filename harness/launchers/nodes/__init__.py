"""The node-list launcher: a multi-node job without Slurm (Kubernetes, SkyPilot, a plain list of hosts): every node runs
the same command, node 0 leads (launcher.py, ranks.py), the schedulers' variables (env.py); the recipe backends give it:
harness/contracts/recipes/nodes.py."""
