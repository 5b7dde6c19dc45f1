"""How a run runs (docs/ARCHITECTURE.md, "Data path"): one dataclass that `ddlbench run`, `ddlbench sweep`,
advise, doctor and the tests hand to the one sweep path, instead of a dozen keywords."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import UserError
from harness.results.paths import default_run_dir


@dataclass(frozen=True)
class RunOptions:
    output: Path | None = None
    """The run directory; None = results/<run-id>."""
    resume: bool = False
    """Into an existing run directory: run only the cells it lacks."""
    retry_failed: bool = False
    """With `resume`: run the cells recorded as failed again too (measured cells stay)."""
    overwrite: bool = False
    """Discard the run already in the directory and measure it again."""
    progress: bool = True
    """A progress bar on the terminal."""
    cold: bool = False
    """Start every rank as a fresh interpreter instead of forking it from the pre-imported zygote."""
    oversubscribe: bool = False
    """Allow more workers x threads than this box has cores (with a warning; timings are then noise)."""
    launcher: str | None = None
    """The launcher by name (`--launcher`); None = the one the environment and the sweep file say
    (harness/launchers/choose.py)."""
    launcher_flags: dict = field(default_factory=dict)
    """The command line's launcher flags (--nnodes, --node-rank, ... --join-timeout), None where not given."""

    def __post_init__(self):
        if self.retry_failed and not self.resume:
            raise UserError("--retry-failed re-runs the failed cells of a run: give it with --resume --output RUN_DIR")

    def with_run_dir(self, name: str) -> RunOptions:
        """These options with their run directory: `output` as given, else a new one named `name`
        (results/<run-id>); `resume` needs the directory of the run it goes on with."""
        if self.output is not None:
            return self
        if self.resume:
            raise UserError("--resume needs --output RUN_DIR: the run directory of the interrupted run")
        return dataclasses.replace(self, output=default_run_dir(name))
