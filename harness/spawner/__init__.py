"""The spawner (docs/ARCHITECTURE.md, "Launcher"): ddlbench's own way of starting a cell's ranks on this box,
or where a Placement puts them (the testbed's namespaces), and supervising them until they end: `cell.py`
(one cell's ranks and their variables), `ranks.py` (start ranks, hand them to the one supervisor, kill
them). Every launcher that spawns ranks itself uses it; no launcher imports another launcher."""
