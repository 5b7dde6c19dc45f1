"""The srun launcher's per-task shim as a process (harness/launchers/srun/task.py does the work):

    python -m harness.rank.srun_task STYLE [--here | --log-dir D] -- ARGV

The backends are loaded first (docs/ARCHITECTURE.md, "Plugins"): the styles are theirs
(`SrunRecipe.task_envs`), and the launcher layer that holds the shim sits below them.
"""

from __future__ import annotations

import sys

from harness import backends
from harness.launchers.srun import task


def main(argv: list[str]) -> int:
    backends.load()
    return task.main(argv)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python -m harness.rank.srun_task STYLE [--log-dir DIR] -- ARGV...")
    sys.exit(main(sys.argv[1:]))
