"""Parameter-server key placement now lives in harness/grouping/rules.py (`assign_servers`, issue 49): this name
stays only until harness/backends/torch_dist/ps_layout.py imports it from there, then goes."""

from __future__ import annotations

from harness.grouping.rules import assign_servers

__all__ = ["assign_servers"]
