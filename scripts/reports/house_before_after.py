"""The house by layers changed no measurement (issue 33's acceptance): the README's quick sweep run ROUNDS times
with the code before the restructure and ROUNDS times after, alternated (B A, A B, B A), on a quiet machine;
then the regression gate over rounds, the runs before as the baseline; and the sweep's cell ids and summary
columns compared.

    git worktree add ../before <commit before>     # the checkout before
    python scripts/reports/house_before_after.py --before ../before --out reports/house-before-after

Each side runs from its own checkout (`PYTHONPATH=<checkout> python -m <its cli>`), so ranks import their
own side's code (every launcher puts the driver's package first on the ranks' PYTHONPATH).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from harness.results.scrub import machine_paths, scrubbed_copy

ROOT = Path(__file__).resolve().parents[2]


def cli(checkout: Path) -> list[str]:
    """The checkout's command line: `harness.cli` before the house had a cli/ folder, `harness.cli.main` after."""
    main = "harness.cli.main" if (checkout / "harness" / "cli" / "main.py").exists() else "harness.cli"
    return [sys.executable, "-m", main]


def run_rounds(sides: dict[str, Path], sweep: Path, results: Path, rounds: int) -> None:
    for i in range(rounds):
        for side in list(sides) if i % 2 == 0 else list(reversed(sides)):
            out = results / f"{side}-{i + 1}"
            if (out / "summary.parquet").exists():
                continue
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.monotonic()
            code = subprocess.run(
                [*cli(sides[side]), "sweep", str(sweep), "--output", str(out), "--no-progress"],
                cwd=sides[side],
                stdout=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": str(sides[side])},
            ).returncode
            (out / "sweep_wall_s.txt").write_text(f"{time.monotonic() - t0:.2f}\n")
            print(f"{out.name}: {time.monotonic() - t0:.1f} s (exit {code})", flush=True)


def gate(results: Path, rounds: int) -> str:
    before = [str(results / f"before-{i + 1}") for i in range(rounds)]
    after = [str(results / f"after-{i + 1}") for i in range(rounds)]
    base = results / "baselines"
    subprocess.run(
        [*cli(ROOT), "baseline", "save", "before", *before, "--force", "--dir", str(base)],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    out = subprocess.run(
        [*cli(ROOT), "compare", "before", *after, "--baselines-dir", str(base)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return out.stdout + out.stderr + f"\n(exit status {out.returncode}: 0 = no cell worse)\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="the checkout before the restructure")
    ap.add_argument("--sweep", type=Path, default=ROOT / "sweeps" / "quick.yaml")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--results", type=Path, default=ROOT / "results" / "house-before-after")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "house-before-after")
    a = ap.parse_args(argv)
    run_rounds({"before": a.before.resolve(), "after": ROOT}, a.sweep.resolve(), a.results, a.rounds)
    a.out.mkdir(parents=True, exist_ok=True)
    verdict = gate(a.results, a.rounds)
    (a.out / "gate.txt").write_text(verdict)
    sums = {
        s: [pd.read_parquet(a.results / f"{s}-{i + 1}" / "summary.parquet") for i in range(a.rounds)]
        for s in ("before", "after")
    }
    ids = {s: sorted(sums[s][0]["cell_id"]) for s in sums}
    cols = {s: list(sums[s][0].columns) for s in sums}
    walls = {
        s: [float((a.results / f"{s}-{i + 1}" / "sweep_wall_s.txt").read_text()) for i in range(a.rounds)] for s in sums
    }
    lines = [
        "# The house by layers: the quick sweep before and after",
        "",
        f"`python scripts/reports/house_before_after.py --before <checkout>`: {a.rounds} runs a side of "
        f"`{a.sweep.relative_to(ROOT) if a.sweep.resolve().is_relative_to(ROOT) else a.sweep}`, alternated, "
        f"the runs before as the gate's baseline.",
        "",
        f"- cell ids identical: {ids['before'] == ids['after']} ({len(ids['after'])} cells)",
        f"- summary columns identical: {cols['before'] == cols['after']} ({len(cols['after'])} columns)",
        f"- sweep wall, s: before {', '.join(f'{w:.1f}' for w in walls['before'])}; "
        f"after {', '.join(f'{w:.1f}' for w in walls['after'])}",
        "",
        "The gate over rounds (`ddlbench compare`):",
        "",
        "```",
        verdict.strip(),
        "```",
        "",
    ]
    (a.out / "README.md").write_text("\n".join(lines))
    for s in sums:
        for i in range(a.rounds):
            run = a.results / f"{s}-{i + 1}"
            dst = a.out / "runs" / f"{s}-{i + 1}"
            dst.mkdir(parents=True, exist_ok=True)
            for t in ("summary.parquet", "environment.parquet"):
                scrubbed_copy(run / t, dst / t, machine_paths(ROOT, BEFORE=a.before.resolve(), RESULTS=a.results))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
