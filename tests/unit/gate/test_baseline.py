"""Stored baselines: `ddlbench baseline save/list` and comparing against a baseline by name.

pytest -q tests/unit/gate/test_baseline.py         # ~10 s (two real 1-s load samples)
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.core.errors import UserError
from harness.gate.baselines import check_name, list_baselines, resolve, save_baseline
from harness.results import environment, machine_load
from harness.results.store import load_run


def fake_run(
    d, seed: int = 0, fingerprint: str = "fp-a", slow: float = 1.0, cpu: str = "test cpu", env: dict | None = None
):
    """A small run directory with the real table shapes (one ok cell, one failed cell)."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True)
    base = {
        "schema_version": 1,
        "run_id": d.name,
        "source": "measured",
        "reason": "",
        "sample_unit": "img",
        "backend": "torch",
        "workers": 2,
        "servers": 0,
        "batch_per_worker": 8,
        "global_batch": 16,
        "seq_len": None,
        "knobs_json": "{}",
        "network": "loopback",
        "workload": "resnet50-tiny",
    }
    pd.DataFrame(
        [
            {**base, "cell_id": "c-ddp", "scheme": "ddp", "status": "ok", "throughput_median": 100.0},
            {**base, "cell_id": "c-ps", "scheme": "bsp-ps", "status": "failed", "reason": "timeout"},
        ]
    ).to_parquet(d / "summary.parquet")
    pd.DataFrame(
        [
            {
                "schema_version": 1,
                "run_id": d.name,
                "cell_id": "c-ddp",
                "rank": r,
                "iteration": i,
                "iter_s": slow * 0.16 * rng.lognormal(0, 0.05),
            }
            for i in range(10)
            for r in range(2)
        ]
    ).to_parquet(d / "raw.parquet")
    pd.DataFrame(
        [
            {
                "schema_version": 1,
                "run_id": d.name,
                "fingerprint": fingerprint,
                "created_utc": "2026-01-01T00:00:00+00:00",
                "git_commit": "abc",
                "python": "3.11",
                "torch": "2.13.0+cpu",
                "cpu_model": cpu,
                "cpu_count": 2,
                **(env or {}),
            }
        ]
    ).to_parquet(d / "environment.parquet")
    (d / "sweep.yaml").write_text("name: t\n")
    return d


def test_save_copies_tables_and_meta(tmp_path):
    run = fake_run(tmp_path / "run1")
    dest = save_baseline("cpu-tiny", run, root=tmp_path / "baselines")
    assert sorted(p.name for p in dest.iterdir()) == [
        "environment.parquet",
        "meta.json",
        "raw.parquet",
        "summary.parquet",
        "sweep.yaml",
    ]
    meta = json.loads((dest / "meta.json").read_text())
    assert meta["name"] == "cpu-tiny" and meta["fingerprint"] == "fp-a"
    assert meta["cells"] == 2 and meta["cells_ok"] == 1 and meta["source_run"] == str(run)
    assert meta["created_utc"].startswith("20")
    t = load_run(dest)  # a baseline is a loadable run directory
    assert len(t.summary) == 2 and len(t.raw) == 20
    assert [m["name"] for m in list_baselines(tmp_path / "baselines")] == ["cpu-tiny"]


@pytest.mark.parametrize("bad", ["", "a b", "../x", "x/y", "é", "a" * 65, "name.v2"])
def test_bad_names_are_refused(bad):
    with pytest.raises(UserError, match="letters, digits"):
        check_name(bad)


def test_overwrite_needs_force(tmp_path):
    run = fake_run(tmp_path / "run1")
    save_baseline("b", run, root=tmp_path)
    with pytest.raises(UserError, match=r"already exists.*--force"):
        save_baseline("b", run, root=tmp_path)
    save_baseline("b", run, root=tmp_path, force=True)
    assert not list(tmp_path.glob(".b.tmp*"))


def test_resolve_prefers_paths_then_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DDLBENCH_BASELINES", raising=False)
    run = fake_run(tmp_path / "run1")
    save_baseline("cpu", run)  # default root: results/baselines under the working directory
    assert resolve("cpu").resolve() == tmp_path / "results" / "baselines" / "cpu"
    assert resolve(str(run)) == run
    with pytest.raises(UserError, match="baselines in results/baselines: cpu"):
        resolve("nope")


def test_cli_save_list_and_compare_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DDLBENCH_BASELINES", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    fake_run(tmp_path / "run1", seed=1)
    fake_run(tmp_path / "run2", seed=2, slow=1.3)
    fake_run(tmp_path / "run3", seed=3, fingerprint="fp-other", cpu="other cpu")
    runner = CliRunner()
    r = runner.invoke(cli, ["baseline", "list"])
    assert r.exit_code == 0 and "no baselines" in r.output
    r = runner.invoke(cli, ["baseline", "save", "main-cpu", "run1"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["baseline", "list"])
    assert r.exit_code == 0
    line = next(ln for ln in r.output.splitlines() if ln.startswith("main-cpu"))
    assert "fp-a" in line and "1/2" in line and "run1" in line
    r = runner.invoke(cli, ["baseline", "save", "bad name", "run1"])
    assert r.exit_code == 2 and r.output.startswith("error: baseline name 'bad name' is not allowed")
    r = runner.invoke(cli, ["baseline", "save", "main-cpu", "run1"])
    assert r.exit_code == 2 and "--force" in r.output
    r = runner.invoke(cli, ["baseline", "save", "x", "no-such-run"])
    assert r.exit_code == 2 and "no run at" in r.output
    # the gate against the stored baseline: the ok cell got 30% slower, the failed cell still fails
    r = runner.invoke(cli, ["compare", "main-cpu", "run2"])
    assert r.exit_code == 1, r.output
    assert "| worse |" in r.output and "| failed |" in r.output
    r = runner.invoke(cli, ["compare", "main-cpu", "run3"])
    assert r.exit_code == 2 and "(cpu_model: test cpu -> other cpu)" in r.output


def test_a_torn_stored_baseline_is_told_to_save_it_again_and_a_torn_run_to_resume(tmp_path, monkeypatch):
    """A baseline has no cells/ to rebuild a table from and no run to resume: its fix is `baseline save` again
    from the runs its meta.json names (issue 52); a run's torn table is rebuilt by resuming the run."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    run, other = fake_run(tmp_path / "run1", seed=1), fake_run(tmp_path / "run2", seed=2)
    stored = save_baseline("main-cpu", run, root=tmp_path / "baselines")
    torn = stored / "raw.parquet"
    torn.write_bytes(torn.read_bytes()[: torn.stat().st_size // 2])
    for argv in (
        ["compare", "main-cpu", str(other), "--baselines-dir", str(tmp_path / "baselines")],
        ["report", str(stored), "-o", str(tmp_path / "report")],
    ):
        r = CliRunner().invoke(cli, argv)
        assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1, r.output
        assert r.stderr.startswith(f"error: cannot read table {torn} ") and "--resume" not in r.stderr, r.stderr
        assert r.stderr.rstrip().endswith(
            f"save the baseline again from its runs: `ddlbench baseline save main-cpu "
            f"{run} --force --dir {tmp_path / 'baselines'}`, or remove it"
        ), r.stderr
    (run / "cells").mkdir()  # a run (with cells/ to rebuild from and sweep.yaml to resume by)
    (run / "summary.parquet").write_bytes(b"PAR1 torn")
    r = CliRunner().invoke(cli, ["show", str(run)])
    resume = f"`ddlbench sweep {run / 'sweep.yaml'} --resume --output {run}`"
    assert r.exit_code == 2 and f"resume the run ({resume}): it rebuilds the table from the run's cells/" in r.stderr


BUSY = {
    "load_1m_start": 3.1,
    "load_5m_start": 2.0,
    "load_15m_start": 1.2,
    "others_cores_start": 1.35,
    "others_start": "python3[4242] 0.95 core, pytest[77] 0.40 core",
    "load_1m_end": 1.0,
    "load_5m_end": 1.0,
    "load_15m_end": 1.0,
    "others_cores_end": 0.0,
    "others_end": "",
}


def test_a_run_measured_on_a_busy_machine_is_refused_unless_forced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake_run(tmp_path / "busy", env=BUSY)
    fake_run(tmp_path / "quiet", env={**BUSY, "others_cores_start": 0.3, "others_start": "x[1] 0.30 core"})
    r = CliRunner().invoke(cli, ["baseline", "save", "b", "busy", "--dir", "bl"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert r.output.startswith("error: refusing to store a baseline from a busy machine")
    assert "1.35 cores at the start (python3[4242] 0.95 core, pytest[77] 0.40 core)" in r.output
    assert not (tmp_path / "bl" / "b").exists()
    r = CliRunner().invoke(cli, ["baseline", "save", "b", "busy", "--dir", "bl", "--force"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["baseline", "save", "q", "quiet", "--dir", "bl"])  # 0.3 core: below the rule
    assert r.exit_code == 0, r.output


def test_show_warns_about_a_busy_machine(tmp_path):
    fake_run(tmp_path / "busy", env=BUSY)
    fake_run(tmp_path / "quiet")  # a run from before the load was recorded: no warning
    r = CliRunner().invoke(cli, ["show", str(tmp_path / "busy")])
    assert r.exit_code == 0 and "measured on a busy machine" in r.stderr and "python3[4242]" in r.stderr
    r = CliRunner().invoke(cli, ["show", str(tmp_path / "quiet")])
    assert r.exit_code == 0 and "busy" not in r.stderr


def _spin(detached: bool, *names: str) -> tuple[int, object]:
    """A process burning one core: our child, or (via a shell that exits at once) no longer in our tree;
    `names` are extra words of its command line."""
    code = "import time\nt = time.time() + 60\nwhile time.time() < t: pass\n"
    if not detached:
        p = subprocess.Popen([sys.executable, "-c", code, *names])
        return p.pid, p
    words = " ".join(map(shlex.quote, names))
    sh = subprocess.run(
        ["sh", "-c", f"{shlex.quote(sys.executable)} -c {shlex.quote(code)} {words} >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(sh.stdout.strip()), None


def test_load_sample_lists_other_busy_processes_but_never_the_runs_own(monkeypatch):
    monkeypatch.setattr(machine_load, "PROCESS_MIN_CORES", 0.05)  # the 2 shared cores may be loaded
    other, _ = _spin(detached=True)
    child_pid, child = _spin(detached=False)
    try:
        time.sleep(0.3)
        snap = machine_load.sample("start", sample_s=1.0)
    finally:
        os.kill(other, signal.SIGKILL)
        child.kill()
        child.wait()
    assert f"[pid {other}]" in snap["others_start"] and "python" in snap["others_start"], snap
    assert f"[pid {child_pid}]" not in snap["others_start"], snap  # the run's own tree (its ranks) is left out
    assert snap["others_cores_start"] > 0.05 and snap["load_1m_start"] >= 0
    assert machine_load.busy_reason(snap | {"others_cores_start": 0.6}).startswith("other processes used 0.60")


def test_a_runs_windows_flag_others_but_not_its_own_ranks_wherever_they_were_started(tmp_path, monkeypatch):
    """Windows between cells (machine_load.Watch): a process of someone else's is in the start, end and
    busiest windows; the run's child and a rank that srun started (not a descendant, but its command
    line names the run directory) never are; nothing waits when the run outlasts a window."""
    monkeypatch.setattr(machine_load, "PROCESS_MIN_CORES", 0.05)  # the 2 shared cores may be loaded
    run = tmp_path / "run"
    run.mkdir()
    watch = machine_load.Watch(run, window_s=0.5)
    other, _ = _spin(detached=True)
    srun_rank, _ = _spin(True, "-m", "harness.rank.worker", "--cell", str(run / "cells" / "c" / "cell.json"))
    child_pid, child = _spin(detached=False)
    try:
        time.sleep(0.3)
        assert watch.mark() is None  # a window shorter than 0.5 s stays open
        time.sleep(0.4)
        start = watch.mark()  # the first window closed: its columns, to be recorded at once
        time.sleep(0.3)
        t0 = time.monotonic()
        cols = watch.finish()  # the open window is short: the end reaches back over the last closed one
        assert time.monotonic() - t0 < 0.3
    finally:
        for pid in (other, srun_rank):
            os.kill(pid, signal.SIGKILL)
        child.kill()
        child.wait()
    for when in ("start", "end", "max"):
        text = (start if when == "start" else cols)[f"others_{when}"]
        assert f"[pid {other}]" in text, (when, text)
        assert f"[pid {srun_rank}]" not in text and f"[pid {child_pid}]" not in text, (when, text)
    assert cols["others_cores_max"] >= cols["others_cores_end"] > 0.05 and cols["load_1m_end"] >= 0
    assert machine_load.busy_reason(
        {**cols, "others_cores_start": 0.0, "others_cores_end": 0.0, "others_cores_max": 0.9}
    ).startswith("other processes used 0.90 cores in the busiest window")
    pd.DataFrame([{"run_id": "r", "others_cores_start": 0.0, "others_cores_max": 2.0, "others_max": "x"}]).to_parquet(
        run / "environment.parquet"
    )
    environment.record_load(run, cols, merge=True)  # resumed: the first start and the busier max are kept
    env = pd.read_parquet(run / "environment.parquet").iloc[0]
    assert (env["others_cores_start"], env["others_cores_max"]) == (0.0, 2.0)
    assert env["others_cores_end"] == cols["others_cores_end"] and env["others_end"] == cols["others_end"]


def test_a_run_records_its_load_without_waiting_for_a_sample(tmp_path):
    """A real one-cell run records start, end and busiest-window columns; the start ones are on disk as
    soon as its first window closed."""
    out = tmp_path / "one"
    r = CliRunner().invoke(
        cli,
        [
            "run",
            "--workload",
            "bert-base-tiny",
            "--scheme",
            "ddp",
            "--workers",
            "2",
            "--iters",
            "2",
            "--warmup",
            "0",
            "--output",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    env = pd.read_parquet(out / "environment.parquet").iloc[0]
    for when in ("start", "end", "max"):
        assert env[f"others_cores_{when}"] >= 0 and isinstance(env[f"others_{when}"], str)
    assert env["load_1m_start"] >= 0 and env["load_1m_end"] >= 0


def test_the_end_of_a_run_warns_about_a_busy_machine(tmp_path, capsys):
    from harness.report.console import finish_run

    fake_run(tmp_path / "busy", env=BUSY)
    assert finish_run(tmp_path / "busy") == 1  # its failed cell; the warning does not change the status
    err = capsys.readouterr().err
    assert "warning: run busy was measured on a busy machine" in err and "1.35 cores at the start" in err
