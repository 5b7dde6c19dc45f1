"""The GPU module in one short command that always finishes with its verdict (README, "GPUs").

    bash scripts/gpu_report.sh OUT                       # both parts within 420 s, correctness included
    bash scripts/gpu_report.sh OUT --budget 300          # within 300 s
    bash scripts/gpu_report.sh OUT --device cpu          # the same script on this CPU, tiny workloads

OUT ends with exactly three files (harness/doctor/timing/summary.py): summary.md (every check, its verdict, its figure,
its reason), summary.json (the same, for machines) and details.tar.gz (logs, CSVs, the sweep, the profiles). The
summary is written first as a skeleton of every planned check with its estimate (harness/doctor/timing/budget.py) and
rewritten as each check ends, details.tar.gz repacked with it, so a run killed from outside leaves every verdict
reached. Every check runs in a process of its own, stopped when the budget ends (`stopped`, with what it had
reached); a check that no longer fits is `NOT RUN: no time left (needs about N s)`.

Part 1 (correctness): the machine (nvidia-smi, versions), `ddlbench doctor --device cuda --quick`, the GPU
correctness tests (`pytest -m "gpu and not timing"`, -n 8 with pytest-xdist). Part 2 (timing): the event-phase
checks (`pytest -m "gpu and timing"`, serially) and harness/doctor/timing/gpu_timing.py, which records its own rows.
Exit status 1 when a check FAILED, 2 on bad input (OUT not empty), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch

from harness.core.atomic import replace_atomic
from harness.core.errors import Interrupted, UserError, signals_raise
from harness.doctor.timing import budget as B
from harness.doctor.timing.gpu_timing import parse as timing_options
from harness.doctor.timing.summary import FILES, Summary, no_time
from harness.doctor.timing.timing_run import Run
from harness.procs.kill import kill_tree
from harness.procs.trampoline import orphan_proof

ROOT = Path(__file__).resolve().parents[3]
CPU_TIMING = [
    "--workloads",
    "bert-base-tiny",
    "resnet50-tiny",
    "--dtypes",
    "fp32",
    "--warmup",
    "3",
    "--iters",
    "10",
    "--pairs",
    "4",
]
"""--device cpu: the timing part on the tiny workloads, sized for a 2-core box."""
SKIP_LINE = re.compile(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$")


def check_out(out: Path) -> Path:
    """OUT must be new or empty: it ends with the three files only, and an old run's files would be taken for
    this one's."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(
            f"{out} is not an empty folder: the report writes exactly {', '.join(FILES)} into a new "
            f"one; name a new folder or empty this one"
        )
    out.mkdir(parents=True, exist_ok=True)
    return out.resolve()


def checks(device: str) -> list[dict]:
    """Part 1 and the event-phase checks, with their commands (argv without the interpreter)."""
    py = [sys.executable]
    pytest = [*py, "-m", "pytest", "tests", "-v", "-rs", "-p", "no:cacheprovider"]
    return [
        {
            "check": "doctor",
            "part": "correctness",
            "estimate_s": B.ESTIMATE_S["doctor"],
            "argv": [*py, "-m", "harness.cli.main", "doctor", "--device", device, "--quick"],
        },
        {
            "check": "correctness (one GPU)",
            "part": "correctness",
            "estimate_s": B.ESTIMATE_S["correctness"],
            "gpu": True,
            "argv": [*pytest, "-m", "gpu and not timing", *(["-n", "8"] if _has("xdist") else [])],
        },
        {
            "check": "event phases",
            "part": "timing",
            "estimate_s": B.ESTIMATE_S["event phases"],
            "gpu": True,
            "argv": [*pytest, "-m", "gpu and timing", "-k", "not harness_against_bare", "-p", "no:xdist"],
        },
    ]


def _has(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0


def machine(details: Path, device: str) -> str:
    """nvidia-smi and the versions into the details; one line for the summary's head."""
    smi = shutil.which("nvidia-smi")
    text = (
        "".join(
            subprocess.run([smi, *a], capture_output=True, text=True, timeout=30).stdout for a in ([], ["topo", "-m"])
        )
        if smi
        else "no nvidia-smi\n"
    )
    (details / "nvidia-smi.txt").write_text(text)
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if device == "cuda" else []
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpus": gpus,
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
    }
    (details / "versions.json").write_text(json.dumps(versions, indent=1))
    where = ", ".join(gpus) or f"CPU only ({os.cpu_count()} cores)"
    return f"{where}; torch {torch.__version__}" + (f", CUDA {torch.version.cuda}" if torch.version.cuda else "")


def pytest_figure(log: Path) -> tuple[str, str]:
    """(figure, reason) from a pytest log, finished or not: the counts reached and the NOT RUN reasons."""
    text = log.read_text(errors="replace") if log.exists() else ""
    counts = {k: len(re.findall(rf"\b{k}\b", text)) for k in ("PASSED", "FAILED", "ERROR")}
    skipped = {}
    for m in (SKIP_LINE.match(line) for line in text.splitlines()):
        if m:
            why = m.group(2).replace("NOT RUN: ", "")[:80]
            skipped[why] = skipped.get(why, 0) + int(m.group(1))
    figure = f"{counts['PASSED']} passed, {counts['FAILED'] + counts['ERROR']} failed, {sum(skipped.values())} NOT RUN"
    return figure, "; ".join(f"{n} x {why}" for why, n in sorted(skipped.items(), key=lambda x: -x[1])[:4])


def run_process(argv: list[str], log: Path, timeout_s: float) -> int | None:
    """Run argv (behind the parent-death trampoline, in a session of its own) into `log`; its exit status, or
    None when the time ran out and it was killed with everything it started."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
    }
    with open(log, "w") as f:
        proc = subprocess.Popen(
            orphan_proof(argv), stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True
        )
        try:
            return proc.wait(timeout=max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            return None
        except BaseException:
            kill_tree(proc)
            raise


class Report:
    """One report: OUT, the work folder packed into OUT/details.tar.gz, the budget and the summary."""

    def __init__(self, out: Path, budget_s: float, device: str):
        self.out, self.device = out, device
        self.work = Path(tempfile.mkdtemp(prefix="ddlbench-gpu-report-"))
        self.budget = B.Budget.of(budget_s)
        self.summary = Summary(out)

    def pack(self) -> None:
        def write(tmp: Path) -> None:
            with tarfile.open(tmp, "w:gz") as tar:
                tar.add(self.work, arcname="details")

        replace_atomic(self.out / "details.tar.gz", write)

    def step(self, c: dict) -> None:
        """One part-1 or phase check: run it if it fits, record its verdict, repack the details."""
        name = c["check"]
        if c.get("gpu") and self.device != "cuda":
            self.summary.update(name, status="NOT RUN", verdict="NOT RUN: needs a GPU (--device cpu)")
            return
        if not self.budget.fits(c["estimate_s"]):
            self.summary.update(name, **no_time(c["estimate_s"]))
            return
        self.summary.update(name, status="running")
        log = self.work / f"{name.split(' ')[0]}.txt"
        rc = run_process(c["argv"], log, self.budget.left())
        figure, reason = pytest_figure(log) if "pytest" in c["argv"] else (f"exit status {rc}", "")
        if rc is None:
            self.summary.update(
                name,
                status="stopped",
                verdict="stopped: the budget ran out",
                figure=figure,
                reason=reason or "log in details.tar.gz",
            )
        else:
            self.summary.update(
                name,
                status="ok" if rc == 0 else "FAILED",
                figure=figure,
                reason=reason or f"{log.name} in details.tar.gz",
            )
        self.pack()

    def timing(self, argv: list[str]) -> None:
        """harness/doctor/timing/gpu_timing.py in its own process: it records its rows; what it left running or pending
        is said here: stopped by the budget, or failed with the process (its log's last line)."""
        log = self.work / "gpu_timing.txt"
        rc = run_process([sys.executable, "-m", "harness.doctor.timing.gpu_timing", *argv], log, self.budget.left())
        lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
        for r in self.summary.pending():
            if r["part"] != "timing":
                continue
            if rc not in (0, 1, None):
                fields = {
                    "status": "FAILED",
                    "verdict": f"FAILED: gpu_timing exited with status {rc}",
                    "reason": (lines or [""])[-1][:300],
                }
            elif r["status"] == "pending":
                fields = no_time(r["estimate_s"] or 0)
            else:
                fields = {"status": "stopped", "verdict": "stopped: the budget ran out"}
            self.summary.update(r["check"], **fields)
        self.pack()


def parse(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bash scripts/gpu_report.sh", description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="a new or empty folder: it gets summary.md, summary.json, details.tar.gz")
    ap.add_argument("--budget", type=float, default=B.DEFAULT_BUDGET_S, help="seconds for both parts (default 420)")
    ap.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cpu: the same checks on this CPU, tiny workloads, the GPU-only ones NOT RUN",
    )
    return ap.parse_args(argv)


def prepare(a: argparse.Namespace) -> Path:
    """OUT, or UserError for bad input."""
    if not a.budget > B.RESERVE_S + 10:
        raise UserError(
            f"--budget {a.budget:g} leaves no time to run anything (it must exceed {B.RESERVE_S + 10:g} s "
            f"kept for the summary); give more seconds, e.g. --budget {B.DEFAULT_BUDGET_S:g}"
        )
    if a.device == "cuda" and not torch.cuda.is_available():
        raise UserError(
            "no CUDA device here (or a CPU build of torch): run it on the GPU machine, or pass "
            "--device cpu to run the same checks on this CPU"
        )
    return check_out(a.out)


def main(argv=None) -> int:
    a = parse(argv)
    try:
        out = prepare(a)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rep = Report(out, a.budget, a.device)
    timing = [
        str(rep.work / "timing"),
        "--summary",
        str(out),
        "--device",
        a.device,
        *(CPU_TIMING if a.device == "cpu" else []),
    ]
    steps = checks(a.device)
    rep.summary.plan(
        {
            "title": f"GPU report ({a.device})",
            "machine": machine(rep.work, a.device),
            "budget_s": a.budget,
            "device": a.device,
            "command": f"bash scripts/gpu_report.sh OUT --budget {a.budget:g} --device {a.device}",
        },
        steps + Run(timing_options(timing)).plan(),
    )
    rep.pack()
    code = 0
    try:
        with signals_raise():
            for c in steps:
                rep.step(c)
            rep.timing([*timing, "--budget-s", f"{max(1.0, rep.budget.left() - 5):.0f}"])
    except Interrupted as e:  # killed from outside (SIGTERM, Ctrl-C): say where it stopped
        code = 128 + e.signum
        for r in rep.summary.pending():
            rep.summary.update(
                r["check"],
                status="stopped" if r["status"] == "running" else "NOT RUN",
                verdict=f"{'stopped' if r['status'] == 'running' else 'NOT RUN'}: interrupted ({e})",
            )
    finally:
        rep.pack()
        shutil.rmtree(rep.work, ignore_errors=True)
    doc = rep.summary.finish()
    failed = any(r["status"] == "FAILED" for r in doc["checks"])
    print((out / "summary.md").read_text())
    return code or (1 if failed else 0)


if __name__ == "__main__":
    raise SystemExit(main())
