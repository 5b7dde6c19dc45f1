"""One doctor's visit: the facts, the smoke cells and the GPU-only checks, as a report and one dict.

One doctor's visit: check the options, collect the facts, run the smoke cells, name the GPU-only checks;
the report's lines go to `echo` as they become known and everything comes back as one dict (the --json
document). `ddlbench doctor` (harness/cli/commands/doctor.py) is this function behind click options.

    report = diagnose(quick=True)              # prints the report, returns {"facts", "smoke", "ok", ...}
    report = diagnose(cells=False, echo=None)  # facts only, silent
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from harness.doctor import facts, gpu_probe, render, smoke
from harness.results.files import check_output_dir
from harness.results.store import prepare_run


@contextlib.contextmanager
def _run_dir(keep: Path | None, cells: bool):
    """The smoke run's directory: `keep` (checked, refused if it holds a run), a temporary one, or None
    without cells. Entered before anything runs, so a bad --keep is refused first."""
    if not cells:
        yield None
    elif keep is not None:
        check_output_dir(keep, "--keep")
        prepare_run(keep, resume=False, overwrite=False)  # refuses a run already there (only reads); the
        yield keep  # smoke cells lock and prepare it for real
    else:
        with tempfile.TemporaryDirectory(prefix="ddlbench-doctor-") as tmp:
            yield Path(tmp) / "run"


def diagnose(
    workload: str = "bert-base-tiny",
    device: str = "auto",
    quick: bool = False,
    cells: bool = True,
    keep: Path | None = None,
    progress: bool = True,
    echo: Callable[[str], None] | None = print,
    timeout_s: float = smoke.SmokeConfig.timeout_s,
) -> dict:
    """Facts, smoke results and GPU checks as one dict; `echo` gets the report's lines as they are known
    (None: silent). Bad options raise UserError before anything runs."""
    t0 = time.monotonic()
    say = echo or (lambda line: None)
    cfg = smoke.config_for(workload, device, quick, timeout_s)
    with _run_dir(keep, cells) as run_dir:
        with contextlib.redirect_stdout(sys.stderr):  # libraries chatter on import (DeepSpeed logs to stdout)
            found = facts.collect(cfg.device)
        for line in render.facts_lines(found):
            say(line)
        results: list[smoke.SmokeResult] = []
        if run_dir is not None:
            say("")
            say(render.smoke_header(cfg))
            todo, known = smoke.plan(cfg, found["backends"])
            results = smoke.order(smoke.run(todo, run_dir, progress) + known)
            for line in render.smoke_lines(results):
                say(line)
    checks = gpu_probe.run_gpu_checks(found["gpus"]["count"] if cfg.device == "cuda" else 0)
    for line in ["", *render.gpu_lines(checks), ""]:
        say(line)
    wall_s = time.monotonic() - t0
    for line in (
        render.verdict(results, wall_s, str(keep) if keep else None)
        if cells
        else [f"doctor: facts only (--no-cells) in {wall_s:.0f} s"]
    ):
        say(line)
    return {
        "facts": found,
        "smoke_config": asdict(cfg) if cells else None,
        "smoke": [r.as_dict() for r in results],
        "gpu_checks": checks,
        "ok": all(r.status != "failed" for r in results),
        "wall_s": round(wall_s, 1),
        "run_dir": str(keep) if keep and cells else None,
    }
