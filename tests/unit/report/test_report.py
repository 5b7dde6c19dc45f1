"""`ddlbench report`: figures are pure functions whose matplotlib objects carry the expected panels and
series; the report of a real (tiny) sweep is valid PNGs plus one self-contained HTML page.

    pytest -q tests/unit/report/test_report.py           # ~40-60 s: one real 2-cell sweep (local + ddp on 2 ranks)
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from matplotlib.collections import LineCollection

from harness.cli.main import cli
from harness.experiment.dispatch import launcher_for, sweep_cells
from harness.experiment.options import RunOptions
from harness.experiment.sweep import load_sweep
from harness.report import breakdown as B
from harness.report import figures as F
from harness.report import figures_model as FM
from harness.report import findings as FD
from harness.report import tables as T
from harness.report.data import merge
from harness.report.render import Page, to_markdown, write_report
from harness.results.store import RunTables, load_run
from helpers import ROOT

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SCHEMES = ["ddp", "wfbp-a2a", "bsp-ps"]
EFFICIENCY = {"ddp": 0.9, "wfbp-a2a": 0.75, "bsp-ps": 0.5}  # at N=2; decays with N


def synth_summary(
    workloads=("resnet50-tiny", "bert-base-tiny"),
    workers=(1, 2, 4),
    network="loopback",
    failed=(),
    run_id="synth",
    source="measured",
) -> pd.DataFrame:
    """Summary rows shaped like the harness's: local 1-worker baselines, schemes x workers, scaling."""
    rows = []
    for wl in workloads:
        x1 = 200.0 if wl.startswith("resnet") else 90.0
        unit = "img" if wl.startswith("resnet") else "seq"
        cells = [("local", 1)] + [(s, n) for s in SCHEMES for n in workers]
        for scheme, n in cells:
            eff = 1.0 if scheme == "local" else EFFICIENCY[scheme] ** np.log2(max(n, 2))
            x = x1 * n * eff
            it = 8 * n / x
            row = {
                "schema_version": 1,
                "run_id": run_id,
                "cell_id": f"{wl}.{scheme}.torch.w{n}",
                "source": source,
                "status": "ok",
                "reason": "",
                "log_tail": "",
                "workload": wl,
                "sample_unit": unit,
                "scheme": scheme,
                "backend": "torch",
                "workers": n,
                "nodes": 1,
                "servers": 1 if scheme.endswith("-ps") else 0,
                "batch_per_worker": 8,
                "global_batch": 8 * n,
                "seq_len": 64 if unit == "seq" else None,
                "knobs_json": "{}",
                "network": network,
                "iter_s_median": it,
                "iter_s_iqr": it * 0.05,
                "iter_s_cv": 0.05,
                "samples": 12,
                "throughput_median": x,
                "throughput_ci95_low": x * 0.96,
                "throughput_ci95_high": x * 1.05,
                "baseline_throughput": x1,
                "speedup": x / x1,
                "scaling_efficiency": x / (n * x1),
                "forward_s": 8 / x1 * 0.33,
                "backward_s": 8 / x1 * 0.6,
                "optimizer_s": 8 / x1 * 0.07,
                "comm_wait_s": max(it - 8 / x1, 0) * 0.8,
                "exposed_comm_s": max(it - 8 / x1, 0),
                "overlap_ratio": 0.3,
                "straggler_rank": n - 1,
                "params": 1e6,
                "grad_bytes": 4e6,
                "flops_per_sample": 1e9,
                "intensity_flops_per_byte": 2000.0,
            }
            if (wl, scheme, n) in failed:
                row.update(
                    status="failed",
                    reason=f"rank 1 timed out after 600 s ({scheme})",
                    log_tail="Traceback...\nTimeoutError",
                )
                for k in ("throughput_median", "scaling_efficiency", "iter_s_median"):
                    row[k] = np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def synth_commbench(workers=2) -> pd.DataFrame:
    alpha, beta = 200e-6, 8 / 1e9  # 200 us start-up, 1 Gbit/s
    rows = []
    for size in [2**k for k in range(12, 25, 2)]:
        for rep in range(3):
            t = (alpha + beta * size) * (1 + 0.02 * rep)
            alg = size * 8 / t / 1e9
            rows.append(
                {
                    "schema_version": 1,
                    "run_id": "cb",
                    "collective": "allreduce",
                    "backend": "torch",
                    "workers": workers,
                    "size_bytes": size,
                    "rep": rep,
                    "time_s": t,
                    "algbw_gbit_s": alg,
                    "busbw_gbit_s": alg * 2 * (workers - 1) / workers,
                    "network": "loopback",
                }
            )
    return pd.DataFrame(rows)


def tables(summary, commbench=None, name="synth", tmp=None) -> RunTables:
    env = pd.DataFrame(
        [
            {
                "schema_version": 1,
                "run_id": name,
                "fingerprint": "f00",
                "torch": "2.13.0+cpu",
                "device": "cpu",
                "cpu_model": "test",
                "hosts": "vm",
            }
        ]
    )
    return RunTables(
        path=Path(tmp or "/nonexistent") / name,
        raw=pd.DataFrame(),
        summary=summary,
        environment=env,
        commbench=commbench if commbench is not None else pd.DataFrame(),
    )


# ---------------------------------------------------------------------------------------- figures


def test_throughput_panels_lines_and_ideal():
    fig = F.throughput_vs_workers(synth_summary())
    assert len(fig.axes) == 2  # one panel per workload
    for ax, wl, x1 in zip(fig.axes, ["bert-base-tiny", "resnet50-tiny"], [90.0, 200.0]):
        assert ax.get_title() == wl
        labels = [ln.get_label() for ln in ax.get_lines()]
        # one line per scheme, the measured 1-worker baseline at N=1, the ideal
        assert labels[:3] == SCHEMES and labels[3] == F.LOCAL_LABEL and labels[4].startswith("ideal")
        local, ideal = ax.get_lines()[3], ax.get_lines()[4]
        assert list(local.get_xdata()) == [1] and list(local.get_ydata()) == pytest.approx([x1])
        assert list(ideal.get_xdata()) == [1, 2, 3, 4]
        assert list(ideal.get_ydata()) == pytest.approx([x1, 2 * x1, 3 * x1, 4 * x1])
        assert sum(isinstance(c, LineCollection) for c in ax.collections) == 4  # CI bars: schemes + local
        assert "throughput" in ax.get_ylabel() and ax.get_xlabel().startswith("workers N")
    assert "95% CI of the mean" in fig._suptitle.get_text() and "median" in fig._suptitle.get_text()


def test_schemes_at_one_worker_count_are_told_apart():
    """Many schemes at N=2 (the quick sweep's layout): each its own marker, shifted sideways within
    +-0.2 of N so none hides another; the legend sits outside the panels."""
    fig = F.throughput_vs_workers(synth_summary(workers=(2,)))
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if ln.get_label() in SCHEMES]
    xs = [float(ln.get_xdata()[0]) for ln in lines]
    assert len(set(xs)) == 3 and all(abs(x - 2) <= 0.21 for x in xs)
    assert len({ln.get_marker() for ln in lines}) == 3
    assert [float(x) for x in ax.get_xticks()] == [1.0, 2.0]
    legend = fig.legends[0]
    assert F.LOCAL_LABEL in [t.get_text() for t in legend.get_texts()]
    fig.canvas.draw()  # the legend is right of every panel, not over one
    right_of_panels = max(a.get_window_extent().x1 for a in fig.axes)
    assert legend.get_window_extent().x0 >= right_of_panels - 1


def test_throughput_names_failed_cells_and_one_panel_per_network():
    s = synth_summary(failed={("resnet50-tiny", "bsp-ps", 4)})
    fig = F.throughput_vs_workers(s)
    texts = [t.get_text() for t in fig.axes[1].texts]
    assert any("failed: bsp-ps N=4" in t for t in texts)
    merged, _ = merge([tables(synth_summary(network="eth-10g")), tables(synth_summary(network="ib-100g"))])
    fig = F.throughput_vs_workers(merged["summary"])
    assert len(fig.axes) == 4 and fig.axes[0].get_title() == "bert-base-tiny @ eth-10g"


def test_efficiency_heatmap_cells_and_annotations():
    s = synth_summary(failed={("bert-base-tiny", "wfbp-a2a", 4)})
    fig = F.efficiency_heatmap(s)
    ax = fig.axes[0]
    img = ax.get_images()[0].get_array()
    assert img.shape == (3, 2)  # scheme x workload
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 6 and "failed" in texts
    assert f"{0.75**2:.2f}" in texts  # resnet wfbp-a2a at N=4
    assert [t.get_text() for t in ax.get_yticklabels()] == SCHEMES
    assert "N=4" in ax.get_xticklabels()[0].get_text()


def test_grouped_bars_per_worker_count_then_per_network():
    fig = F.grouped_bars(synth_summary())
    ax = fig.axes[0]
    assert len(ax.containers) == 3  # N=1, N=2, N=4
    assert all(len(c.patches) == 3 for c in ax.containers)  # one bar per scheme
    assert [t.get_text() for t in ax.get_xticklabels()] == SCHEMES
    merged, _ = merge(
        [
            tables(synth_summary(network="eth-10g")),
            tables(synth_summary(network="ib-100g")),
            tables(synth_summary(network="ipoib")),
        ]
    )
    fig = F.grouped_bars(merged["summary"], metric="efficiency")
    ax = fig.axes[0]
    assert [c.get_label() for c in ax.containers] == ["ipoib", "eth-10g", "ib-100g"]
    assert ax.containers[0].patches[0].get_height() == pytest.approx(0.9**2)  # ddp at N=4
    assert fig.legends[0].get_title().get_text() == "network"


def test_breakdown_stacks_four_phases_per_cell():
    fig = B.breakdown(synth_summary(workers=(2,)))
    assert len(fig.axes) == 2
    ax = fig.axes[0]
    assert len(ax.containers) == 4 and all(len(c.patches) == 4 for c in ax.containers)  # local + 3 cells
    assert any("exposed" in t.get_text() for t in ax.texts)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert "local N=1" in labels and "bsp-ps N=2" in labels


def test_breakdown_shows_the_wait_inside_forward_as_its_own_segment():
    s = synth_summary(workers=(2,)).assign(forward_wait_s=0.0)
    assert len(B.breakdown(s).axes[0].containers) == 4  # measured, but zero everywhere: not drawn
    s.loc[s["scheme"] == "wfbp-a2a", "forward_wait_s"] = 0.012
    fig = B.breakdown(s)
    ax = fig.axes[0]
    assert len(ax.containers) == 5
    seg = [c for c in ax.containers if "ByteScheduler pre-hooks" in c.get_label()]
    assert len(seg) == 1 and seg[0].get_label() == "wait in forward (ByteScheduler pre-hooks)"
    widths = sorted(p.get_width() for p in seg[0].patches)
    assert widths == pytest.approx([0, 0, 0, 12.0])  # ms, only the cell that waited
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "wait in forward (ByteScheduler pre-hooks)" in legend


def test_busbw_panel_with_fit():
    fig = FM.busbw_vs_size(synth_commbench())
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    measured, fit = ax.get_lines()
    assert fit.get_linestyle() == "--" and "α=" in fit.get_label()
    fits = FM.commbench_fits(synth_commbench())
    assert fits["alpha_s"][0] == pytest.approx(200e-6, rel=0.05)
    assert fits["inv_beta_gbit_s"][0] == pytest.approx(1.0, rel=0.05)
    # at 16 MiB the fit's busbw is close to the link's 1 Gbit/s (x 2(N-1)/N = 1 for N=2)
    assert fit.get_ydata()[-1] == pytest.approx(measured.get_ydata()[-1], rel=0.05)


def test_predicted_overlaid_on_measured():
    m = synth_summary(workloads=("resnet50-tiny",), workers=(1, 2))
    p = synth_summary(workloads=("resnet50-tiny",), workers=(2, 4, 16), source="predicted")
    p = p[p["scheme"] != "local"]
    p["throughput_median"] *= 1.1
    s = pd.concat([m, p], ignore_index=True)
    fig = FM.predicted_vs_measured(s)
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == {f"{sc} {kind}" for sc in SCHEMES for kind in ("measured", "predicted")}
    assert lines["ddp predicted"].get_linestyle() == "--" and ax.get_xscale() == "log"
    errs = FM.prediction_errors(s)
    assert len(errs) == 3 and errs["error_pct"].to_numpy() == pytest.approx([10.0] * 3)


def test_full_report_from_frames_lists_failures_and_optional_panels(tmp_path):
    s = synth_summary(failed={("resnet50-tiny", "bsp-ps", 4)})
    out = write_report([tables(s, synth_commbench(), tmp=tmp_path)], tmp_path / "rep", dpi=40)
    assert {"busbw.png", "throughput.png", "efficiency.png", "bars.png", "breakdown.png"} <= set(out)
    assert "predicted.png" not in out
    md = out["md"].read_text()
    assert "rank 1 timed out after 600 s (bsp-ps)" in md and "1 cell(s) failed" in md
    assert "No predicted rows" in md  # (and "No commbench table": see the real run's report)
    out = write_report([tables(pd.DataFrame(), synth_commbench(), tmp=tmp_path)], tmp_path / "cb", dpi=40)
    assert sorted(k for k in out if k.endswith(".png")) == ["busbw.png"]  # a commbench-only run
    assert "No summary table in these runs" in out["md"].read_text()


def test_checks_call_out_impossible_and_noisy_numbers():
    from harness.report.tables import sanity_checks

    s = synth_summary()
    assert sanity_checks(s) == []
    hit = (s["scheme"] == "ddp") & (s["workers"] == 2) & (s["workload"] == "resnet50-tiny")
    s.loc[hit, "scaling_efficiency"] = 1.4
    s.loc[hit, "iter_s_cv"] = 0.3
    warnings = sanity_checks(s)
    assert len(warnings) == 2
    assert "resnet50-tiny ddp N=2 (1.40)" in warnings[0] and "1 of 20 cells" in warnings[1]


# ------------------------------------------------------------------------------ a real tiny sweep


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("real")
    sweep = d / "tiny.yaml"
    sweep.write_text(
        "name: tiny\nworkloads: [resnet50-tiny]\nschemes: [ddp]\nworkers: [2]\nwarmup: 1\niters: 4\ndevice: cpu\n"
    )
    r = CliRunner().invoke(cli, ["sweep", str(sweep), "--output", str(d / "run"), "--no-progress"])
    assert r.exit_code == 0, r.output
    return d / "run"


def test_report_of_a_real_run(real_run, tmp_path):
    t = load_run(real_run)
    assert set(t.summary["status"]) == {"ok"} and len(t.summary) == 2  # local + ddp on 2 ranks
    out_dir = tmp_path / "reports" / "tiny"
    r = CliRunner().invoke(cli, ["report", str(real_run), "-o", str(out_dir), "--dpi", "60"])
    assert r.exit_code == 0, r.output
    pngs = sorted(p.name for p in out_dir.glob("*.png"))
    assert pngs == ["bars.png", "breakdown.png", "efficiency.png", "throughput.png"]
    for p in out_dir.glob("*.png"):
        assert p.read_bytes()[:8] == PNG_MAGIC
    page = (out_dir / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 4
    assert not re.search(r'src="(?!data:)', page) and "<link" not in page  # nothing external
    assert "<table>" in page and t.environment["fingerprint"][0] in page
    md = (out_dir / "report.md").read_text()
    assert "![" in md and "(throughput.png)" in md and re.search(r"\| ddp \| 2 \| [0-9.]+ ±[0-9.]+ \|", md)
    assert "same in every row: workload: resnet50-tiny." in md and "| network |" not in md
    assert (out_dir / "summary.csv").exists() and (out_dir / "summary.parquet").exists()
    assert pd.read_parquet(out_dir / "summary.parquet")["cell_id"].tolist() == t.summary["cell_id"].tolist()
    assert re.search(r"\| machine \| (quiet \(other processes|busy: other processes used)", md)  # the load seen

    assert "No commbench table" in md and "None: every cell finished." in md
    fig = F.throughput_vs_workers(t.summary)
    assert len(fig.axes) == 1 and next(ln.get_label() for ln in fig.axes[0].get_lines()) == "ddp"
    assert len(fig.axes[0].get_lines()) == 3  # ddp, the measured local at N=1, ideal


def test_report_merges_runs_and_flags_same_network(real_run, tmp_path):
    r = CliRunner().invoke(cli, ["report", str(real_run), str(real_run), "-o", str(tmp_path / "m"), "--dpi", "50"])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "m" / "report.md").read_text()
    assert "hold the same cells on the same network label" in md


def test_report_takes_predicted_and_commbench_parquet_files(real_run, tmp_path):
    pred = synth_summary(workloads=("resnet50-tiny",), workers=(2, 4, 8), source="predicted")
    pred[pred["scheme"] != "local"].to_parquet(tmp_path / "predicted.parquet")
    synth_commbench().to_parquet(tmp_path / "comm.parquet")
    out = tmp_path / "model"
    r = CliRunner().invoke(
        cli,
        [
            "report",
            str(real_run),
            str(tmp_path / "predicted.parquet"),
            str(tmp_path / "comm.parquet"),
            "-o",
            str(out),
            "--dpi",
            "50",
        ],
    )
    assert r.exit_code == 0, r.output
    assert (out / "predicted.png").read_bytes()[:8] == PNG_MAGIC
    assert (out / "busbw.png").read_bytes()[:8] == PNG_MAGIC
    md = (out / "report.md").read_text()
    assert "| resnet50-tiny | ddp | 2 | loopback |" in md  # predicted vs measured ddp at N=2
    assert (out / "report.html").read_text().count("data:image/png;base64,") == 6
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "x.parquet")
    r = CliRunner().invoke(cli, ["report", str(tmp_path / "x.parquet"), "-o", str(out)])
    assert r.exit_code == 2 and "neither summary-shaped" in r.output


def test_report_of_a_missing_run_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["report", "nope", "-o", "out"])
    assert r.exit_code == 2 and r.output.startswith("error:")


# ----------------------------------------------------------------------- summary table and findings


def test_summary_table_fits_a_laptop_and_explains_overlap_on_shared_cores():
    s = synth_summary(workers=(2, 4))
    env = pd.DataFrame([{"run_id": "synth", "cpu_count": 4}])
    table, caption = T.summary_table(s, env)
    page = Page("t")
    page.table(table)
    widest = max(len(line) for line in to_markdown(page).splitlines())
    assert widest <= 110, to_markdown(page)
    assert list(table.columns) == ["workload", "scheme", "N", "X/s (±95% CI)", "CV", "eff.", "exp. ms", "overlap"]
    assert "same in every row" not in caption and "network" not in table  # loopback: the one-box default
    # 4 workers on 4 cores: no core left for gloo, so overlap is marked and explained; 2 on 4 is not
    four = table[table["N"] == 4]["overlap"]
    two = table[(table["N"] == 2)]["overlap"]
    assert all(v.endswith(T.SHARED_MARK) for v in four) and not any(v.endswith(T.SHARED_MARK) for v in two)
    assert T.SHARED_NOTE in caption
    _, caption = T.summary_table(synth_summary(workers=(2,)), env)
    assert T.SHARED_NOTE not in caption
    # bsp-ps at N=2 with its server: 2 workers + 1 server on 3 cores share them all
    table, _ = T.summary_table(synth_summary(workers=(2,)), env.assign(cpu_count=3))
    marks = dict(zip(table["scheme"], table["overlap"]))
    assert marks["bsp-ps S=1"].endswith(T.SHARED_MARK) and not marks["ddp"].endswith(T.SHARED_MARK)


def study_like(slow_spread: float, bert_eff: float) -> pd.DataFrame:
    """Two workloads x two networks at N=2: bert (low intensity) at `bert_eff` best, resnet at 0.8;
    methods on the slow link spread by `slow_spread`, on the fast one by 1.1."""
    rows = []
    for net, rate, spread in (("emulated-200mbit", 200.0, slow_spread), ("emulated-2gbit", 2000.0, 1.1)):
        s = synth_summary(workers=(2,), network=net).assign(network_rate_mbit=rate)
        s["comm_bytes_per_iter"] = np.where(s["workload"] == "bert-base-tiny", 8e7, 1e7)
        for i, sc in enumerate(SCHEMES):
            hit = s["scheme"] == sc
            factor = 1.0 if i == 0 else (1 / spread if i == 2 else 1 / (1 + (spread - 1) / 2))
            for wl, eff in (("bert-base-tiny", bert_eff), ("resnet50-tiny", 0.8)):
                h = hit & (s["workload"] == wl)
                x1 = s.loc[h, "baseline_throughput"]
                s.loc[h, "throughput_median"] = 2 * x1 * eff * factor
                s.loc[h, "scaling_efficiency"] = eff * factor
        rows.append(s)
    return pd.concat(rows, ignore_index=True)


def test_findings_are_computed_from_the_numbers():
    text1, _best = FD.finding_intensity(study_like(slow_spread=1.6, bert_eff=0.4))
    assert text1.startswith("Finding 1") and "holds here (2 of 2 settings)" in text1
    assert "bert-base-tiny 0.40 (ddp) vs resnet50-tiny 0.80 (ddp)" in text1
    assert "(100 FLOP/byte per worker)" in text1 and "(800 FLOP/byte)" in text1  # 1e9 * 8 / 8e7 and / 1e7
    text2, _sp = FD.finding_architecture(study_like(slow_spread=1.6, bert_eff=0.4))
    assert "holds here" in text2 and "larger on emulated-200mbit than on emulated-2gbit in 2 of 2" in text2
    assert "1.60x the slowest (bsp-ps)" in text2
    # numbers that contradict the study say so
    text1, _ = FD.finding_intensity(study_like(slow_spread=1.6, bert_eff=0.95))
    assert "does not hold here (0 of 2 settings)" in text1
    text2, _ = FD.finding_architecture(study_like(slow_spread=1.05, bert_eff=0.4))
    assert "does not hold here" in text2


def test_report_has_a_findings_section_with_figures(tmp_path):
    out = write_report([tables(study_like(1.6, 0.4), tmp=tmp_path)], tmp_path / "rep", dpi=40)
    assert {"finding-intensity.png", "finding-architecture.png"} <= set(out)
    md = out["md"].read_text()
    assert "## Findings" in md and "Finding 1, low model intensity" in md and "Finding 2, the architecture" in md
    assert md.index("## Findings") < md.index("## Scaling")


def test_report_warns_about_a_run_measured_on_a_busy_machine(tmp_path):
    t = tables(synth_summary(workers=(2,)), tmp=tmp_path)
    t.environment = t.environment.assign(
        others_cores_start=1.2, others_start="pytest[99] 1.20 core", others_cores_end=0.0, others_end=""
    )
    md = write_report([t], tmp_path / "busy", dpi=40)["md"].read_text()
    assert (
        "Warning: run synth was measured on a busy machine: other processes used 1.20 cores at the start "
        "(pytest[99] 1.20 core)" in md
    )
    assert "| machine | busy: other processes used 1.20 cores" in md


def test_the_showcase_sweeps_cover_the_studys_axes():
    """sweeps/showcase-*.yaml (scripts/reports/showcase.sh): every method, DDP, ZeRO-2 and Horovod, a high- and a
    low-intensity workload, a slow and a fast link, 2 and 3 emulated hosts, one worker per host."""
    cells = []
    for part in ("resnet50", "bert", "horovod-resnet50", "horovod-bert"):
        cfg = load_sweep(ROOT / "sweeps" / f"showcase-{part}.yaml")
        cells += sweep_cells(cfg, launcher_for(cfg, RunOptions()))  # planned as the testbed plans them
    methods = {(c.scheme, c.backend) for c in cells if c.scheme != "local"}
    assert methods == {
        (s, "torch")
        for s in (
            "ddp",
            "bsp-a2a",
            "wfbp-a2a",
            "mgwfbp",
            "bytescheduler-a2a",
            "bsp-ps",
            "wfbp-ps",
            "bytescheduler-ps",
            "dear",
            "fsdp",
        )
    } | {("zero2", "deepspeed"), ("horovod", "horovod")}
    for m in methods:  # each on both workloads, both links, 2 and 3 hosts
        got = {(c.workload, c.network_rate_mbit, c.workers, c.nodes) for c in cells if (c.scheme, c.backend) == m}
        assert got == {
            (w, r, n, n) for w in ("resnet50-tiny", "bert-base-tiny") for r in (200.0, 2000.0) for n in (2, 3)
        }, m
    assert {c.batch for c in cells if c.workload == "resnet50-tiny"} == {64}  # the study's ResNet-50 batch
    assert len(cells) == 100 and all(c.iters >= 10 for c in cells)
