"""The srun launcher's per-task shim: give one task the variables its framework reads, then exec.

    python -m harness.rank.srun_task STYLE [--here | --log-dir D] -- ARGV
    harness.rank.srun_task.main([STYLE, "--here", "--", "-m", "harness.rank.worker", ...])   # a warm rank

The srun launcher puts it in front of each rank's argv for backends whose framework does not read SLURM_*
(`SrunContext.shim`, harness/launchers/srun/context.py). The styles belong to the backends
(`SrunRecipe.task_envs`: e.g. `torch` gives torchrun's RANK, WORLD_SIZE, LOCAL_RANK, ...; `horovod` the
variables horovodrun gives each slot), so the backends are loaded first (docs/ARCHITECTURE.md, "Plugins");
this module only looks the style up, applies it and execs (docs/ARCHITECTURE.md, "Launching"). With `--here`
it runs the module in this process instead (`-m MODULE ARGS`: its `main(ARGS)`): a warm rank forked by a
node's zygote under Slurm (harness/launchers/srun/warm.py) gets its style on its own node, as a cold task does.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from harness import backends
from harness.contracts.backend import every
from harness.contracts.recipes.srun import SrunRecipe
from harness.core.errors import UserError


def task_env(style: str, environ: Mapping[str, str]) -> dict[str, str | None]:
    """Variables the shim sets (None = unset) for one task of `style`, from its environment."""
    styles = {name: fn for _, r in every(SrunRecipe) for name, fn in r.task_envs.items()}
    if style not in styles:
        raise UserError(f"unknown task environment style {style!r}; use one of {', '.join(sorted(styles))}")
    return styles[style](environ)


def main(argv: list[str]) -> int:
    """`python -m harness.rank.srun_task STYLE [--here | --log-dir D] -- ARGV`: load the backends, set, then
    exec (or run here)."""
    backends.load()
    style, rest = argv[0], argv[1:]
    log_dir, here = None, rest[:1] == ["--here"]
    rest = rest[1:] if here else rest
    if rest[:1] == ["--log-dir"]:
        log_dir, rest = rest[1], rest[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    for k, v in task_env(style, os.environ).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    if log_dir:  # a framework launcher gathers every rank's output on its own terminal; keep one log per rank like srun
        fd = os.open(Path(log_dir) / f"rank{os.environ['RANK']}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    if here:
        if rest[:1] != ["-m"] or len(rest) < 2:
            raise UserError(f"srun_task --here runs `-m MODULE ARGS`, not {' '.join(rest)!r}")
        return importlib.import_module(rest[1]).main(rest[2:])
    os.execvp(rest[0], rest)
    return 127


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python -m harness.rank.srun_task STYLE [--log-dir DIR] -- ARGV...")
    sys.exit(main(sys.argv[1:]))
