"""Run directories (issue 12): one writer at a time, no silent overwrite, damaged tables and unwritable
places as one-line errors, ranks importing the driver's own package, and exit statuses a CI job can
trust (`run` exits 1 when its cell failed; `compare` with nothing compared does not pass).

    pytest -q tests/integration/processes/test_run_dirs.py          # ~30 s (one real 2-rank cell)
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.core.errors import UserError
from harness.experiment.options import RunOptions
from harness.results import environment, store
from harness.results.files import check_output_dir, check_output_file, read_table
from harness.results.lock import run_lock


def _fake_run(d):
    (d / "cells" / "c1").mkdir(parents=True)
    pd.DataFrame([{"cell_id": "c1", "status": "ok", "reason": ""}]).to_parquet(d / "cells" / "c1" / "summary.parquet")
    pd.DataFrame([{"cell_id": "c1"}]).to_parquet(d / "summary.parquet")
    (d / "notes.md").write_text("mine\n")
    return d


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from harness.results.lock import run_lock
        with run_lock(Path({str(tmp_path)!r}), "ddlbench sweep holder.yaml"):
            print("locked", flush=True)
            time.sleep(60)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with (
            pytest.raises(UserError, match=rf"being written by pid {holder.pid} \(ddlbench sweep holder.yaml\)"),
            run_lock(tmp_path),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
    with (
        run_lock(tmp_path),  # the kernel dropped the dead holder's lock: nothing to clean up
        run_lock(tmp_path),  # re-entrant within one process
    ):
        pass


def test_an_existing_run_needs_resume_or_overwrite(tmp_path):
    run = _fake_run(tmp_path / "run")
    with pytest.raises(UserError, match="already holds a run"):
        store.prepare_run(run, resume=False, overwrite=False)
    store.prepare_run(run, resume=True, overwrite=False)
    assert (run / "cells" / "c1").is_dir()  # resume keeps everything
    store.prepare_run(run, resume=False, overwrite=True)
    assert not (run / "cells").exists() and not (run / "summary.parquet").exists()
    assert (run / "notes.md").read_text() == "mine\n"  # only the run's own parts and tables go
    store.prepare_run(tmp_path / "fresh", resume=False, overwrite=False)  # nothing there: fine


def test_interrupted_cells_are_not_finished(tmp_path):
    run = _fake_run(tmp_path / "run")
    (run / "cells" / "c2").mkdir()
    pd.DataFrame([{"cell_id": "c2", "status": "failed", "reason": "interrupted by SIGTERM after 3 s"}]).to_parquet(
        run / "cells" / "c2" / "summary.parquet"
    )
    assert store.finished_cells(run) == {"c1"}


def test_damaged_tables_and_bad_places_are_user_errors(tmp_path):
    (tmp_path / "t.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(UserError, match=r"cannot read table .*t\.parquet .*re-run it"):
        read_table(tmp_path / "t.parquet", fix="re-run it")
    (tmp_path / "f").write_text("")
    with pytest.raises(UserError, match="is a file"):
        check_output_dir(tmp_path / "f")
    with pytest.raises(UserError, match="which is a file"):
        check_output_dir(tmp_path / "f" / "sub" / "dir")
    with pytest.raises(UserError, match="is a directory"):
        check_output_file(tmp_path)
    assert check_output_file(tmp_path / "new" / "x.parquet").name == "x.parquet"
    assert not (tmp_path / "new").exists()  # checking creates nothing


def test_environment_records_the_package_the_ranks_import():
    from harness.procs.argv import PACKAGE_ROOT

    row = environment.collect("r")
    assert row["package_path"].startswith(PACKAGE_ROOT) and row["package_path"].endswith("harness")


def test_compare_with_nothing_compared_does_not_pass(tmp_path):
    def run(d, workload):
        d.mkdir()
        pd.DataFrame(
            [
                {
                    "schema_version": 1,
                    "run_id": d.name,
                    "cell_id": "c",
                    "source": "measured",
                    "status": "ok",
                    "reason": "",
                    "workload": workload,
                    "sample_unit": "img",
                    "scheme": "ddp",
                    "backend": "torch",
                    "workers": 2,
                    "servers": 0,
                    "batch_per_worker": 8,
                    "global_batch": 16,
                    "seq_len": None,
                    "knobs_json": "{}",
                    "network": "loopback",
                }
            ]
        ).to_parquet(d / "summary.parquet")
        pd.DataFrame(
            [
                {"schema_version": 1, "run_id": d.name, "cell_id": "c", "rank": 0, "iteration": i, "iter_s": 0.1}
                for i in range(8)
            ]
        ).to_parquet(d / "raw.parquet")
        pd.DataFrame([{"fingerprint": "fp"}]).to_parquet(d / "environment.parquet")
        return str(d)

    res = CliRunner().invoke(cli, ["compare", run(tmp_path / "a", "resnet50-tiny"), run(tmp_path / "b", "vgg16-tiny")])
    assert res.exit_code == 1, res.output
    assert "FAIL: nothing compared" in res.output and "1 new, 1 incomparable" in res.output


@pytest.mark.slow
def test_run_exits_1_when_its_cell_failed_and_ranks_ignore_a_stray_package(tmp_path, monkeypatch):
    """A `harness/` folder in the working directory that would break any rank importing it: the ranks
    import the driver's package (-P, package first on PYTHONPATH) and reach the injected fault."""
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "__init__.py").write_text("raise ImportError('STRAY harness package imported')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DDLBENCH_FAULT", "crash:1:1")
    out = tmp_path / "out"
    res = CliRunner().invoke(
        cli,
        [
            "run",
            "--workload",
            "resnet50-tiny",
            "--scheme",
            "bsp-a2a",
            "--workers",
            "2",
            "--warmup",
            "1",
            "--iters",
            "3",
            "--device",
            "cpu",
            "--output",
            str(out),
        ],
    )
    assert res.exit_code == 1, res.output
    s = pd.read_parquet(out / "summary.parquet")
    assert list(s["status"]) == ["failed"] and s["reason"].iloc[0] == "rank 1 died (exit code 17)"
    assert "injected fault: crash" in s["log_tail"].iloc[0] and "STRAY" not in s["log_tail"].iloc[0]
    res = CliRunner().invoke(cli, ["run", "--workload", "resnet50-tiny", "--output", str(out)])
    assert res.exit_code == 2 and "already holds a run" in res.stderr


def test_resume_rebuilds_a_damaged_table_from_the_cell_parts(tmp_path):
    from harness.experiment.execute import run_cells

    run = _fake_run(tmp_path / "run")
    row = {
        "cell_id": "c1",
        "status": "ok",
        "reason": "",
        "scheme": "ddp",
        "workers": 2,
        "workload": "w",
        "batch_per_worker": 8,
        "seq_len": None,
        "device": "cpu",
        "dtype": "fp32",
        "network": "loopback",
        "throughput_median": 1.0,
        "iter_s_median": 1.0,
        "comm_only_s": 0.0,
    }
    pd.DataFrame([row]).to_parquet(run / "cells" / "c1" / "summary.parquet")
    pd.DataFrame([{"cell_id": "c1", "rank": 0, "iteration": 0, "iter_s": 1.0}]).to_parquet(
        run / "cells" / "c1" / "raw.parquet"
    )
    (run / "summary.parquet").write_bytes(b"PAR1 torn")  # e.g. a disk filled up mid-write elsewhere
    pd.DataFrame([{"fingerprint": "fp"}]).to_parquet(run / "environment.parquet")
    run_cells([], run, RunOptions(resume=True, progress=False))
    assert list(read_table(run / "summary.parquet")["cell_id"]) == ["c1"]


ROW = {
    "status": "ok",
    "reason": "",
    "scheme": "ddp",
    "workers": 2,
    "workload": "w",
    "batch_per_worker": 8,
    "seq_len": None,
    "device": "cpu",
    "dtype": "fp32",
    "network": "loopback",
    "throughput_median": 1.0,
    "iter_s_median": 1.0,
    "comm_only_s": 0.0,
}


def _measured_run(d):
    """A run of two measured cells c1, c2 (parts and tables, as store.save_cell leaves them), no ranks launched."""
    for c in ("c1", "c2"):
        raw = pd.DataFrame({"cell_id": c, "rank": 0, "iteration": range(4), "iter_s": [0.1, 0.2, 0.3, 0.4]})
        store.save_cell(d, c, raw, {**ROW, "cell_id": c})
    return d


def _cut(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_a_torn_or_missing_cell_part_is_restored_from_the_run_tables(tmp_path):
    from harness.results.repair import repair_parts

    run = _measured_run(tmp_path / "run")
    parts = {
        c: (
            pd.read_parquet(store.cell_dir(run, c) / "summary.parquet"),
            pd.read_parquet(store.cell_dir(run, c) / "raw.parquet"),
        )
        for c in ("c1", "c2")
    }
    _cut(store.cell_dir(run, "c1") / "summary.parquet")
    (store.cell_dir(run, "c2") / "raw.parquet").unlink()
    c1, c2 = store.cell_dir(run, "c1"), store.cell_dir(run, "c2")
    assert repair_parts(run, ["c1", "c2"]) == [
        f"{c1 / 'summary.parquet'} is torn: restored from {run / 'summary.parquet'} (nothing measured again)",
        f"{c2 / 'raw.parquet'} is missing: restored from {run / 'raw.parquet'} (nothing measured again)",
    ]
    for c, (summary, raw) in parts.items():  # the parts as they were written
        pd.testing.assert_frame_equal(
            pd.read_parquet(store.cell_dir(run, c) / "summary.parquet"), summary, check_like=True
        )
        pd.testing.assert_frame_equal(pd.read_parquet(store.cell_dir(run, c) / "raw.parquet"), raw)
    assert store.finished_cells(run) == {"c1", "c2"} and repair_parts(run) == []


def test_a_cell_with_no_intact_copy_is_measured_again_and_a_foreign_folder_is_named_and_skipped(tmp_path):
    from harness.results.repair import repair_parts

    run = _measured_run(tmp_path / "run")
    _cut(store.cell_dir(run, "c1") / "raw.parquet")
    _cut(run / "raw.parquet")  # the run's table torn too: the cell's samples are nowhere
    foreign = run / "cells" / "backup"
    foreign.mkdir()
    (foreign / "summary.parquet").write_bytes(b"not a table")
    lines = repair_parts(run, ["c1", "c2"])
    assert lines == [
        f"skipped {foreign}: not a cell of this run (no summary of it, no cell.json); move it out of {run / 'cells'}",
        f"{store.cell_dir(run, 'c1') / 'raw.parquet'} is torn and {run / 'raw.parquet'} does not hold "
        f"the cell's samples: it is measured again",
    ]
    assert store.finished_cells(run) == {"c2"}  # c1 runs again on resume; the foreign folder is no cell
    store.consolidate(run)  # the foreign folder skipped, the table rebuilt from the sound parts
    assert set(read_table(run / "raw.parquet")["cell_id"]) == {"c2"} and (foreign / "summary.parquet").exists()


SWEEP_ONE = (
    "name: repair\nworkloads: [resnet50-tiny]\nschemes: [ddp]\nworkers: [1]\nwarmup: 1\niters: 3\n"
    "device: cpu\ntimeout_s: 120\n"
)


@pytest.mark.slow
def test_resume_restores_a_cut_raw_part_without_measuring_it_again(tmp_path):
    """A finished sweep's cell with its raw.parquet cut in half and a foreign folder under cells/ (issue 52): the
    resume says which case applied, measures nothing again, and the samples are the ones measured."""
    sweep, run = tmp_path / "s.yaml", tmp_path / "run"
    sweep.write_text(SWEEP_ONE)
    argv = ["sweep", str(sweep), "--output", str(run), "--no-progress"]
    assert CliRunner().invoke(cli, argv).exit_code == 0
    cells = sorted(store.finished_cells(run))
    cut = store.cell_dir(run, cells[-1]) / "raw.parquet"
    measured = pd.read_parquet(cut)
    results = {c: (store.cell_dir(run, c) / "result.json").stat().st_mtime_ns for c in cells}
    _cut(cut)
    (run / "cells" / "notes").mkdir()
    (run / "cells" / "notes" / "summary.parquet").write_bytes(b"not a table")
    res = CliRunner().invoke(cli, [*argv, "--resume", "--retry-failed"])
    assert res.exit_code == 0, res.output
    assert f"{cut} is torn: restored from {run / 'raw.parquet'} (nothing measured again)" in res.stderr
    named = [line for line in res.stderr.splitlines() if str(run / "cells" / "notes") in line]
    assert len(named) == 1 and "not a cell of this run" in named[0], res.stderr
    assert {c: (store.cell_dir(run, c) / "result.json").stat().st_mtime_ns for c in cells} == results
    pd.testing.assert_frame_equal(pd.read_parquet(cut), measured)
    table = pd.read_parquet(run / "raw.parquet")
    pd.testing.assert_frame_equal(table[table["cell_id"] == cells[-1]].reset_index(drop=True), measured)


def test_sigterm_and_sigint_become_interrupted_only_inside():
    import os
    import signal

    from harness.core.errors import Interrupted, signals_raise

    before = signal.getsignal(signal.SIGTERM)
    for sig in (signal.SIGTERM, signal.SIGINT):
        with pytest.raises(Interrupted) as got, signals_raise():
            os.kill(os.getpid(), sig)
            signal.sigtimedwait([], 0.5) if hasattr(signal, "sigtimedwait") else None
        assert got.value.signum == sig and got.value.exit_code == 128 + sig
    assert signal.getsignal(signal.SIGTERM) == before  # restored on the way out
