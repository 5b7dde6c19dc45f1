"""The regression gate: asv's rule on per-iteration samples (harness/gate/compare.py) and `ddlbench compare`.

    pytest -q tests/unit/gate/test_compare.py          # ~3 s, no processes launched

Samples are iteration times drawn lognormal with a 5% coefficient of variation (what a quiet 2-core box
gives for a tiny model), two ranks per iteration, fixed seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.core.errors import UserError
from harness.gate.comparable import check_environments
from harness.gate.compare import (
    GateConfig,
    compare_runs,
    compared_backends,
    decide,
    gate_exit_code,
    iteration_throughputs,
    significance,
)
from harness.gate.markdown import to_markdown
from harness.measure.stoprule import relative_half_width

BATCH = 8  # per worker


def iter_times(rng, n: int, median_s: float, cv: float = 0.05) -> np.ndarray:
    return median_s * rng.lognormal(0.0, cv, n)  # sigma ~= CV for small sigma


def make_run(
    cells: dict,
    run_id: str = "run",
    cpu: str = "test cpu",
    workers: int = 2,
    backend: str = "torch",
    env: dict | None = None,
) -> dict:
    """cells: name -> per-iteration slowest-rank times (array) or "failed" or ("nosamples", t)."""
    summary, raw = [], []
    for name, times in cells.items():
        wl, scheme = name.split(":")
        cell_id = f"{run_id}.{wl}.{scheme}.w{workers}"
        row = {
            "schema_version": 1,
            "run_id": run_id,
            "cell_id": cell_id,
            "source": "measured",
            "status": "ok",
            "reason": "",
            "workload": wl,
            "sample_unit": "img",
            "scheme": scheme,
            "backend": backend,
            "workers": workers,
            "servers": 0,
            "batch_per_worker": BATCH,
            "global_batch": BATCH * workers,
            "seq_len": None,
            "knobs_json": "{}",
            "network": "loopback",
        }
        if isinstance(times, str):
            row.update(status="failed", reason="rank 1 exited with code 1: RuntimeError: boom")
        else:
            with_raw = not (isinstance(times, tuple) and times[0] == "nosamples")
            times = np.asarray(times[1] if not with_raw else times)
            row["throughput_median"] = float(np.median(BATCH * workers / times))
            if with_raw:
                for i, t in enumerate(times):
                    for rank in range(workers):  # rank 0 a touch faster: the max must pick the slowest
                        raw.append(
                            {
                                "schema_version": 1,
                                "run_id": run_id,
                                "cell_id": cell_id,
                                "rank": rank,
                                "iteration": i,
                                "iter_s": t * (0.97 if rank == 0 else 1.0),
                            }
                        )
        summary.append(row)
    env = pd.DataFrame(
        [
            {
                "schema_version": 1,
                "run_id": run_id,
                "fingerprint": "fp",
                "created_utc": "2026-01-01T00:00:00+00:00",
                "python": "3.11",
                "torch": "2.13.0+cpu",
                "cpu_model": cpu,
                "cpu_count": 2,
                "hosts": "vm",
                "horovod": "0.28.1",
                "deepspeed": "0.19.8",
                **(env or {}),
            }
        ]
    )
    return {"summary": pd.DataFrame(summary), "raw": pd.DataFrame(raw), "environment": env}


def write_run(d, run: dict):
    d.mkdir(parents=True)
    for k, df in run.items():
        df.to_parquet(d / f"{k}.parquet", index=False)
    return d


def gate(base: dict, cur: dict, cfg: GateConfig = GateConfig()) -> pd.DataFrame:
    return compare_runs(base["summary"], base["raw"], cur["summary"], cur["raw"], cfg)


def status_of(table: pd.DataFrame, cell: str) -> str:
    return table.set_index("cell").loc[cell, "status"]


# ------------------------------------------------------------------------------- the decision rule


def test_flags_a_real_20_percent_slowdown():
    rng = np.random.default_rng(1)
    base = make_run({"resnet50-tiny:ddp": iter_times(rng, 30, 0.100)})
    cur = make_run({"resnet50-tiny:ddp": iter_times(rng, 30, 0.120)}, run_id="cur")
    t = gate(base, cur)
    r = t.iloc[0]
    assert r["status"] == "worse"
    assert r["test"] == "mann-whitney" and r["p_value"] < 1e-6
    assert r["ratio"] == pytest.approx(1 / 1.2, rel=0.04)
    assert gate_exit_code(t) == 1


def test_a_real_20_percent_speedup_is_improved_and_passes():
    rng = np.random.default_rng(2)
    base = make_run({"resnet50-tiny:ddp": iter_times(rng, 30, 0.120)})
    cur = make_run({"resnet50-tiny:ddp": iter_times(rng, 30, 0.100)}, run_id="cur")
    t = gate(base, cur)
    assert t.iloc[0]["status"] == "improved" and gate_exit_code(t) == 0


@pytest.mark.parametrize("seed", range(20))
def test_two_samples_of_one_distribution_are_the_same(seed):
    rng = np.random.default_rng(100 + seed)
    a, b = iter_times(rng, 30, 0.1), iter_times(rng, 30, 0.1)
    d = decide(BATCH * 2 / a, BATCH * 2 / b)
    assert d["status"] == "same", d


def test_a_significant_5_percent_change_within_the_factor_is_same():
    rng = np.random.default_rng(3)
    a, b = iter_times(rng, 200, 0.100, cv=0.02), iter_times(rng, 200, 0.105, cv=0.02)
    sig, p, _ = significance(a, b)
    assert sig and p < 0.05  # really different...
    d = decide(BATCH * 2 / a, BATCH * 2 / b)
    assert d["status"] == "same" and d["note"] == ""  # ...but within the 1.10 factor
    assert decide(BATCH * 2 / a, BATCH * 2 / b, GateConfig(factor=1.03))["status"] == "worse"


def test_a_big_ratio_from_noise_alone_is_not_flagged():
    """3 noisy samples a side: the ratio is past 1.10 but the 99% CIs overlap -> same, not worse."""
    a = np.array([100.0, 60.0, 140.0])
    b = np.array([80.0, 50.0, 130.0])
    d = decide(a, b)
    assert d["ratio"] < 1 / 1.10
    assert d["test"] == "ci99" and d["status"] == "same" and d["note"] == "not significant"


def test_few_samples_fall_back_to_non_overlapping_cis():
    rng = np.random.default_rng(4)
    a, b = 16 / iter_times(rng, 4, 0.100), 16 / iter_times(rng, 4, 0.150)
    d = decide(a, b)
    assert d["test"] == "ci99" and math.isnan(d["p_value"]) and d["status"] == "worse"
    assert decide(a[:1], b[:1])["status"] == "incomparable"


def stalled_times(rng, median_s: float) -> np.ndarray:
    """30 iterations 5% around `median_s`, three of them stalled at 0.5 s (a pause): the mean's CI is wide,
    the median's narrow."""
    t = iter_times(rng, 30, median_s)
    t[:3] = 0.5
    return t


def with_reached(run: dict, reached: float | None = None) -> dict:
    """The run's rows as the stop rule writes them: `precision_reached` over each cell's slowest-rank times
    (harness/results/summarize.stop_columns), or the given value."""
    slowest = run["raw"].groupby(["cell_id", "iteration"])["iter_s"].max().groupby(level="cell_id")
    got = {c: relative_half_width(t.to_numpy()) for c, t in slowest}
    summary = run["summary"].assign(
        precision_target=0.05,
        precision_reached=[got[c] if reached is None else reached for c in run["summary"]["cell_id"]],
        stop_reason="reached",
    )
    return {**run, "summary": summary}


def test_rows_with_the_precision_they_reached_decide_with_it_when_samples_are_few():
    """Too few samples for U (min_samples 50): the rows' own precision_reached (the medians' 95% CIs) decides,
    where the CIs of the mean, widened by three stalled iterations, would not; the table says which."""
    rng = np.random.default_rng(6)
    base = make_run({"r:ddp": stalled_times(rng, 0.100)})
    cur = make_run({"r:ddp": stalled_times(rng, 0.115)}, run_id="cur")
    cfg = GateConfig(min_samples=50)
    plain = gate(base, cur, cfg).iloc[0]
    assert plain["test"] == "ci99" and plain["status"] == "same" and plain["note"] == "not significant"
    assert plain["uncertainty"] == "99% CIs of the mean"
    t = gate(with_reached(base), with_reached(cur), cfg)
    r = t.iloc[0]
    assert r["test"] == "median-ci95" and r["status"] == "worse" and gate_exit_code(t) == 1
    assert r["uncertainty"].startswith("medians' 95% CIs +-") and "(precision reached)" in r["uncertainty"]
    md = to_markdown(t, cfg)
    assert "median-ci95" in md and "Uncertainty each verdict used: medians' 95% CIs +-" in md
    assert "(precision reached): r ddp N=2." in md
    loose = gate(with_reached(base, 0.3), with_reached(cur, 0.3), cfg).iloc[0]  # medians +-30%: they overlap
    assert loose["test"] == "median-ci95" and loose["status"] == "same"
    half = gate(with_reached(base), cur, cfg).iloc[0]  # only one row carries it: as before
    assert half["test"] == "ci99" and half["status"] == "same"
    fixed = gate(with_reached(base, math.nan), with_reached(cur, math.nan), cfg).iloc[0]  # fixed cells: NaN
    assert fixed["test"] == "ci99" and fixed["uncertainty"] == "99% CIs of the mean"


def test_with_samples_enough_u_decides_and_the_reached_precision_is_stated():
    rng = np.random.default_rng(7)
    base = make_run({"r:ddp": iter_times(rng, 30, 0.100)})
    cur = make_run({"r:ddp": iter_times(rng, 30, 0.120)}, run_id="cur")
    plain, r = gate(base, cur).iloc[0], gate(with_reached(base), with_reached(cur)).iloc[0]
    assert r["test"] == plain["test"] == "mann-whitney" and r["status"] == plain["status"] == "worse"
    assert r["p_value"] == plain["p_value"]
    assert plain["uncertainty"] == "iterations (Mann-Whitney U)"
    assert r["uncertainty"].startswith("iterations (Mann-Whitney U); medians' 95% CIs +-")


def test_slowest_rank_per_iteration_is_the_sample():
    run = make_run({"w:ddp": [0.1, 0.2]})
    x = iteration_throughputs(run["summary"], run["raw"])
    assert x["run.w.ddp.w2"].tolist() == pytest.approx([16 / 0.1, 16 / 0.2])


# ------------------------------------------------------------------------------------ the statuses


def test_failed_new_and_incomparable_statuses():
    rng = np.random.default_rng(5)
    t = lambda: iter_times(rng, 12, 0.1)
    base = make_run({"a:ddp": t(), "b:ddp": t(), "c:ddp": "failed", "d:ddp": ("nosamples", t()), "e:ddp": t()})
    cur = make_run({"a:ddp": t(), "b:ddp": "failed", "c:ddp": t(), "d:ddp": t(), "f:ddp": t()}, run_id="cur")
    table = gate(base, cur)
    assert status_of(table, "a ddp N=2") == "same"
    assert status_of(table, "b ddp N=2") == "failed"
    assert "RuntimeError: boom" in table.set_index("cell").loc["b ddp N=2", "note"]
    assert status_of(table, "c ddp N=2") == "incomparable"  # baseline failed
    assert status_of(table, "d ddp N=2") == "incomparable"  # baseline has no samples
    assert status_of(table, "e ddp N=2") == "incomparable"  # gone from the current run
    assert status_of(table, "f ddp N=2") == "new"
    assert gate_exit_code(table) == 1  # because of the failed cell
    assert next(iter(table["status"])) == "failed"  # failures first
    md = to_markdown(table)
    assert "| cell | baseline X | current X | ratio | detects | p-value | status |" in md
    assert "FAIL" in md.splitlines()[0]


def test_a_cell_whose_host_heap_changed_is_incomparable_not_improved():
    """A baseline recorded before CPU ranks kept their heap (no `host_heap` column: glibc's defaults) against
    a run that kept it: 30% faster from the allocator alone, so not a verdict on the code."""
    rng = np.random.default_rng(8)
    base = make_run({"a:ddp": iter_times(rng, 30, 0.3), "b:ddp": iter_times(rng, 30, 0.3)})
    cur = make_run({"a:ddp": iter_times(rng, 30, 0.2), "b:ddp": iter_times(rng, 30, 0.2)}, run_id="cur")
    cur["summary"]["host_heap"] = ["kept", "default"]  # b: measured with DDLBENCH_HOST_HEAP=default
    table = gate(base, cur).set_index("cell")
    assert table.loc["a ddp N=2", "status"] == "incomparable"
    assert table.loc["a ddp N=2", "note"].startswith("host heap default -> kept")
    assert table.loc["b ddp N=2", "status"] == "improved"  # both sides default: judged as before
    cur["summary"]["host_heap"] = "kept"
    md = to_markdown(gate(base, cur))
    assert (
        "FAIL: nothing compared (every cell's host heap changed since the baseline: record the baseline again)"
    ) in md.splitlines()[0], md.splitlines()[0]


def test_cells_match_by_axis_values_not_cell_id():
    rng = np.random.default_rng(6)
    base = make_run({"a:ddp": iter_times(rng, 12, 0.1)})
    cur = make_run({"a:ddp": iter_times(rng, 12, 0.1)}, run_id="other-run-id")
    cur["summary"]["knobs_json"] = "{ }"  # same knobs, other spelling
    assert base["summary"]["cell_id"][0] != cur["summary"]["cell_id"][0]
    assert list(gate(base, cur)["status"]) == ["same"]
    cur["summary"]["knobs_json"] = '{"commbench_run": null}'  # a knob added later, left unset
    assert list(gate(base, cur)["status"]) == ["same"]
    cur["summary"]["knobs_json"] = '{"bucket_cap_mb": 1}'  # different knobs: a different cell
    assert sorted(gate(base, cur)["status"]) == ["incomparable", "new"]


def test_predicted_rows_are_not_compared():
    rng = np.random.default_rng(7)
    base = make_run({"a:ddp": iter_times(rng, 12, 0.1)})
    cur = make_run({"a:ddp": iter_times(rng, 12, 0.1)}, run_id="cur")
    pred = cur["summary"].assign(source="predicted", workers=64, cell_id="pred")
    cur["summary"] = pd.concat([cur["summary"], pred], ignore_index=True)
    assert list(gate(base, cur)["status"]) == ["same"]


def test_unlike_environments_are_refused_unless_allowed():
    a = make_run({"a:ddp": [0.1] * 6})["environment"]
    b = make_run({"a:ddp": [0.1] * 6}, cpu="other cpu")["environment"]
    with pytest.raises(
        UserError,
        match="refusing to compare unlike environments "
        r"\(cpu_model: test cpu -> other cpu\).*--allow-env-mismatch",
    ):
        check_environments(a, b, {"torch"})
    assert "compared anyway" in check_environments(a, b, {"torch"}, allow_mismatch=True)
    assert "environments match" in check_environments(a, a, {"torch"})


def test_a_cell_is_fingerprinted_by_its_own_backend_library_only():
    """A Horovod upgrade does not stop the gate judging torch cells; it does stop it judging Horovod's."""
    a = make_run({"a:ddp": [0.1] * 6})
    b = make_run({"a:ddp": [0.1] * 6}, env={"horovod": "0.29.0", "deepspeed": ""})
    assert compared_backends(a["summary"], b["summary"]) == {"torch"}
    assert "environments match" in check_environments(a["environment"], b["environment"], {"torch"})
    with pytest.raises(UserError, match=r"\(horovod: 0.28.1 -> 0.29.0\)"):
        check_environments(a["environment"], b["environment"], {"torch", "horovod"})
    with pytest.raises(UserError, match=r"\(deepspeed: 0.19.8 -> missing\)"):
        check_environments(a["environment"], b["environment"], {"deepspeed"})
    hv = make_run({"a:horovod": [0.1] * 6}, backend="horovod")
    assert compared_backends(hv["summary"], hv["summary"]) == {"horovod"}


def test_gpu_driver_and_topology_are_common_keys_absent_on_cpu():
    cpu = make_run({"a:ddp": [0.1] * 6})["environment"]
    gpu = make_run({"a:ddp": [0.1] * 6}, env={"gpu_driver": "550.54", "gpu_topology": "GPU0 X"})["environment"]
    newer = make_run({"a:ddp": [0.1] * 6}, env={"gpu_driver": "560.1", "gpu_topology": "GPU0 X"})["environment"]
    with pytest.raises(UserError, match=r"gpu_driver: missing -> 550.54; gpu_topology: missing -> GPU0 X"):
        check_environments(cpu, gpu, {"torch"})
    with pytest.raises(UserError, match=r"\(gpu_driver: 550.54 -> 560.1\)"):
        check_environments(gpu, newer, {"torch"})
    assert "environments match" in check_environments(gpu, gpu.copy(), {"torch"})


def test_a_baseline_with_the_old_run_level_fingerprint_still_compares():
    """Baselines recorded before the per-cell rule carry another `fingerprint` hash and no gpu_* columns:
    on the same machine they compare (hashes are labels, values decide)."""
    old = make_run({"a:ddp": [0.1] * 6})["environment"].assign(fingerprint="de3bfccdafbd", byteps="")
    new = make_run({"a:ddp": [0.1] * 6})["environment"].assign(fingerprint="0123456789ab")
    assert "environments match" in check_environments(old, new, {"torch"})
    assert "environments match" in check_environments(old, new, {"horovod", "deepspeed", "byteps"})


def test_a_missing_environment_table_is_refused():
    a = make_run({"a:ddp": [0.1] * 6})["environment"]
    with pytest.raises(UserError, match=r"the current run has no environment.parquet"):
        check_environments(a, pd.DataFrame(), {"torch"})


# --------------------------------------------------------------------------------------- the CLI


@pytest.fixture
def runs(tmp_path):
    rng = np.random.default_rng(8)
    base = write_run(
        tmp_path / "base", make_run({"r:ddp": iter_times(rng, 12, 0.1), "r:wfbp-a2a": iter_times(rng, 12, 0.1)})
    )
    same = write_run(
        tmp_path / "same", make_run({"r:ddp": iter_times(rng, 12, 0.1), "r:wfbp-a2a": iter_times(rng, 12, 0.1)}, "same")
    )
    slow = write_run(
        tmp_path / "slow",
        make_run({"r:ddp": iter_times(rng, 12, 0.1), "r:wfbp-a2a": iter_times(rng, 12, 0.125)}, "slow"),
    )
    other = write_run(
        tmp_path / "other",
        make_run({"r:ddp": iter_times(rng, 12, 0.1), "r:wfbp-a2a": iter_times(rng, 12, 0.1)}, "o", "other cpu"),
    )
    return base, same, slow, other


def test_cli_exit_status_and_job_summary(runs, tmp_path, monkeypatch):
    base, same, slow, _other = runs
    summary_file = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    r = CliRunner().invoke(cli, ["compare", str(base), str(same)])
    assert r.exit_code == 0, r.output
    assert "| r ddp N=2 |" in r.output and "pass" in r.output
    r = CliRunner().invoke(cli, ["compare", str(base), str(slow)])
    assert r.exit_code == 1, r.output
    assert "| r wfbp-a2a N=2 |" in r.output and "| worse |" in r.output
    assert summary_file.read_text().count("### ddlbench compare") == 2  # appended, not overwritten
    r = CliRunner().invoke(cli, ["compare", str(base), str(slow), "--factor", "1.5"])
    assert r.exit_code == 0, r.output


def test_cli_refuses_unlike_environments(runs, monkeypatch):
    base, _, _, other = runs
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    r = CliRunner().invoke(cli, ["compare", str(base), str(other)])
    assert r.exit_code == 2
    assert r.output.startswith("error: refusing to compare unlike environments") and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["compare", str(base), str(other), "--allow-env-mismatch"])
    assert r.exit_code == 0, r.output
    assert "compared anyway" in r.output


def test_cli_unknown_run_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["compare", "nope", "nada"])
    assert r.exit_code == 2 and "neither a run directory nor a stored baseline" in r.output


def test_a_slower_machine_is_called_out():
    """When the no-communication `local` cell is worse too, the summary says the machine changed."""
    rng = np.random.default_rng(9)
    base = make_run({"r:local": iter_times(rng, 12, 0.1), "r:ddp": iter_times(rng, 12, 0.1)})
    cur = make_run({"r:local": iter_times(rng, 12, 0.15), "r:ddp": iter_times(rng, 12, 0.15)}, "cur")
    md = to_markdown(gate(base, cur))
    assert "`local` cell (no communication) also changed (worse)" in md
    assert "local` cell" not in to_markdown(gate(base, base))
