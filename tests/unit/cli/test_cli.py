"""The CLI through click's CliRunner: help everywhere, documented commands, and one-line errors with
exit status 2 for bad input (docs/ARCHITECTURE.md, "Rules")."""

from __future__ import annotations

import click
import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from helpers import ROOT


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _commands(group: click.Group, prefix=()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the top group loads its commands when asked (harness/cli/main.py)
        cmd = group.get_command(ctx, name)
        assert cmd is not None and cmd.name == name, f"`ddlbench {' '.join((*prefix, name))}` does not load"
        yield (*prefix, name), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*prefix, name))


def test_every_command_has_help_and_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    for path, cmd in _commands(cli):
        assert (cmd.help or "").strip(), f"`ddlbench {' '.join(path)}` has no help text"
        res = invoke(*path, "--help")
        assert res.exit_code == 0
        if cmd.hidden:  # an old name kept for users' scripts (`history calibrate`): the README names the new one
            continue
        assert f"ddlbench {' '.join(path)}" in readme, f"`ddlbench {' '.join(path)}` is not in README.md"


def test_list_names_every_scheme_workload_and_knob():
    out = invoke("list").output
    for name in [
        "bsp-a2a",
        "wfbp-a2a",
        "mgwfbp",
        "bytescheduler-a2a",
        "bsp-ps",
        "wfbp-ps",
        "bytescheduler-ps",
        "ddp",
        "resnet50",
        "bert-base",
        "bert-large",
        "gpt2-small",
        "gpt2-small-tiny",
        "bucket_cap_mb",
        "partition_mb",
        "credit_mb",
    ]:
        assert name in out


def _one_line_error(res, *words):
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1, res.output
    assert lines[0].startswith("error:") and "Traceback" not in res.output
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.parametrize(
    "args, words",
    [
        (["--workload", "resnet51"], ["unknown workload 'resnet51'", "resnet50-tiny"]),
        (["--workload", "resnet50-tiny", "--scheme", "wfbp"], ["unknown scheme 'wfbp'", "wfbp-a2a"]),
        (["--workload", "resnet50-tiny", "--backend", "mpi"], ["unknown backend 'mpi'", "torch"]),
        (["--workload", "resnet50-tiny", "--workers", "0"], ["workers must be an integer >= 1"]),
        (["--workload", "resnet50-tiny", "--workers", "-3"], ["workers must be an integer >= 1"]),
        (["--workload", "resnet50-tiny", "--knob", "bucket_cap=5"], ["unknown knob(s) bucket_cap", "bucket_cap_mb"]),
        (["--workload", "resnet50-tiny", "--seq-len", "64"], ["images"]),
    ],
)
def test_run_bad_input(args, words, tmp_path):
    _one_line_error(invoke("run", *args, "--output", str(tmp_path / "r")), *words)


def test_more_workers_than_gpus(monkeypatch, tmp_path):
    # No GPU here: pretend CUDA has one device (the check is what is under test, not CUDA itself).
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    res = invoke(
        "run", "--workload", "resnet50-tiny", "--device", "cuda", "--workers", "2", "--output", str(tmp_path / "r")
    )
    _one_line_error(res, "2 workers per node need 2 GPUs", "this node has 1")


def test_cuda_selected_without_cuda(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    _one_line_error(
        invoke("run", "--workload", "resnet50-tiny", "--device", "cuda", "--output", str(tmp_path / "r")),
        "CUDA is not available",
    )


@pytest.mark.parametrize(
    "text, words",
    [
        ("workloads: [resnet50-tiny\nschemes: [ddp]\n", ["not valid YAML"]),
        ("workloads: [resnet50-tiny]\nshemes: [ddp]\n", ["unknown key(s) shemes", "schemes"]),
        ("- resnet50-tiny\n", ["must be a mapping"]),
        ("workloads: [resnet50-tiny]\nschemes: [nope]\n", ["unknown scheme 'nope'"]),
        ("workloads: [resnet50-tiny]\nworkers: [0]\n", ["workers must be integers >= 1"]),
    ],
)
def test_sweep_bad_file(text, words, tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    _one_line_error(invoke("sweep", str(f), "--output", str(tmp_path / "r")), *words)


def test_missing_sweep_file_and_run(tmp_path):
    _one_line_error(invoke("sweep", str(tmp_path / "nope.yaml")), "does not exist")
    _one_line_error(invoke("show", str(tmp_path / "nope")), "no run at")


@pytest.mark.slow
def test_run_two_workers_through_cli(tmp_path):
    out = tmp_path / "run"
    res = invoke(
        "run",
        "--workload",
        "resnet50-tiny",
        "--scheme",
        "wfbp-a2a",
        "--workers",
        "2",
        "--warmup",
        "1",
        "--iters",
        "4",
        "--device",
        "cpu",
        "--baseline",
        "--output",
        str(out),
        "--history",
        str(tmp_path / "history"),
    )
    assert res.exit_code == 0, res.output
    assert "added 2 cells to" in res.output  # --history: the run appended after it ended (harness/history/)
    history = pd.concat(pd.read_parquet(f) for f in (tmp_path / "history" / "runs").glob("*.parquet"))
    assert sorted(history["scheme"]) == ["local", "wfbp-a2a"] and (history["samples"].map(len) == 4).all()
    s = pd.read_parquet(out / "summary.parquet")
    assert set(s["scheme"]) == {"local", "wfbp-a2a"} and (s["status"] == "ok").all()
    row = s[s["scheme"] == "wfbp-a2a"].iloc[0]
    assert row["workers"] == 2 and row["global_batch"] == 16 and row["samples"] == 4
    assert row["scaling_efficiency"] > 0 and row["speedup"] == pytest.approx(
        row["throughput_median"] / row["baseline_throughput"]
    )
    raw = pd.read_parquet(out / "raw.parquet")
    assert set(raw[raw["cell_id"] == row["cell_id"]]["rank"]) == {0, 1}
    assert (raw["iter_s"] > 0).all()
    shown = invoke("show", str(out))
    assert shown.exit_code == 0 and "wfbp-a2a" in shown.output
    assert "network" not in shown.output  # loopback only: no column for it


def test_show_names_the_network_of_each_cell():

    testbed_run = ROOT / "reports/study-prediction/testbed/inputs/sweep-2host"
    shown = invoke("show", str(testbed_run))
    assert shown.exit_code == 0, shown.output
    assert "network" in shown.output
    assert shown.output.count("emulated-200mbit") == shown.output.count("emulated-1gbit") == 18
