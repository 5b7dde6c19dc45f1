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
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from harness.results.lock import run_lock
        with run_lock(Path({str(tmp_path)!r}), "ddlbench sweep holder.yaml"):
            print("locked", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(UserError, match=rf"being written by pid {holder.pid} \(ddlbench sweep holder.yaml\)"):
            with run_lock(tmp_path):
                pass
    finally:
        holder.kill()
        holder.wait()
    with run_lock(tmp_path):  # the kernel dropped the dead holder's lock: nothing to clean up
        with run_lock(tmp_path):  # re-entrant within one process
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
    pd.DataFrame([{"cell_id": "c2", "status": "failed", "reason": "interrupted by SIGTERM after 3 s"}]
                 ).to_parquet(run / "cells" / "c2" / "summary.parquet")
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
        pd.DataFrame([{"schema_version": 1, "run_id": d.name, "cell_id": "c", "source": "measured", "status": "ok",
                       "reason": "", "workload": workload, "sample_unit": "img", "scheme": "ddp", "backend": "torch",
                       "workers": 2, "servers": 0, "batch_per_worker": 8, "global_batch": 16, "seq_len": None,
                       "knobs_json": "{}", "network": "loopback"}]).to_parquet(d / "summary.parquet")
        pd.DataFrame([{"schema_version": 1, "run_id": d.name, "cell_id": "c", "rank": 0, "iteration": i,
                       "iter_s": 0.1} for i in range(8)]).to_parquet(d / "raw.parquet")
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
    res = CliRunner().invoke(cli, ["run", "--workload", "resnet50-tiny", "--scheme", "bsp-a2a", "--workers", "2",
                                   "--warmup", "1", "--iters", "3", "--device", "cpu", "--output", str(out)])
    assert res.exit_code == 1, res.output
    s = pd.read_parquet(out / "summary.parquet")
    assert list(s["status"]) == ["failed"] and s["reason"].iloc[0] == "rank 1 died (exit code 17)"
    assert "injected fault: crash" in s["log_tail"].iloc[0] and "STRAY" not in s["log_tail"].iloc[0]
    res = CliRunner().invoke(cli, ["run", "--workload", "resnet50-tiny", "--output", str(out)])
    assert res.exit_code == 2 and "already holds a run" in res.stderr


def test_resume_rebuilds_a_damaged_table_from_the_cell_parts(tmp_path):
    from harness.experiment.execute import run_cells

    run = _fake_run(tmp_path / "run")
    row = {"cell_id": "c1", "status": "ok", "reason": "", "scheme": "ddp", "workers": 2, "workload": "w",
           "batch_per_worker": 8, "seq_len": None, "device": "cpu", "dtype": "fp32", "network": "loopback",
           "throughput_median": 1.0, "iter_s_median": 1.0, "comm_only_s": 0.0}
    pd.DataFrame([row]).to_parquet(run / "cells" / "c1" / "summary.parquet")
    (run / "summary.parquet").write_bytes(b"PAR1 torn")  # e.g. a disk filled up mid-write elsewhere
    pd.DataFrame([{"fingerprint": "fp"}]).to_parquet(run / "environment.parquet")
    run_cells([], run, RunOptions(resume=True, progress=False))
    assert list(read_table(run / "summary.parquet")["cell_id"]) == ["c1"]


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
