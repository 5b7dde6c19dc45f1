"""A user's own cluster file (harness/predict/cluster_file.py) predicted through the same door as a registered
cluster: `ddlbench predict --cluster FILE` gives the rows a link preset gives when the file says no more than the
preset, its frameworks' costs and knobs move exactly the methods it names, and a bad file is one line, exit 2."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from helpers import ROOT

EXAMPLE = ROOT / "examples" / "cluster-25g.toml"
PRED = ["predict", "--workload", "bert-base", "--device-preset", "study-gpu", "--compute", "flops"]


def _predict(tmp_path, *args) -> pd.DataFrame:
    out = tmp_path / f"p{len(list(tmp_path.glob('p*.parquet')))}.parquet"
    r = CliRunner().invoke(cli, [*PRED, *args, "-o", str(out)])
    assert r.exit_code == 0, r.output
    return pd.read_parquet(out)


def test_a_file_that_says_what_a_preset_says_predicts_the_same_rows(tmp_path):
    f = tmp_path / "plain.toml"
    f.write_text('label = "eth-10g"\ngpus_per_node = 4\n[links]\ninter = "eth-10g"\nintra = "pcie3-x16"\n')
    schemes = ["--schemes", "ddp,wfbp-a2a,mgwfbp,bytescheduler-a2a,bsp-ps", "--nodes", "1,2,4"]
    by_file = _predict(tmp_path, "--cluster", str(f), *schemes)
    by_link = _predict(tmp_path, "--link", "eth-10g", *schemes)
    key = ["network", "nodes", "workers", "scheme"]
    pd.testing.assert_frame_equal(
        by_file.sort_values(key, ignore_index=True), by_link.sort_values(key, ignore_index=True)
    )


def test_the_example_file_sets_nodes_links_frameworks_and_knobs(tmp_path):
    df = _predict(tmp_path, "--cluster", str(EXAMPLE), "--nodes", "1,2,8", "--schemes", "ddp,wfbp-a2a,bsp-a2a")
    assert set(df["network"]) == {"lab-25g"} and sorted(set(df["workers"])) == [8, 16, 64]
    assert json.loads(df[df["scheme"] == "ddp"].iloc[0]["knobs_json"])["bucket_cap_mb"] == 50
    # the same file without the framework: wfbp-a2a (on the file's horovod stack) gets faster, bsp-a2a (on
    # ddlbench's own in both) stays exactly as it was
    plain = tmp_path / "plain.toml"
    plain.write_text(EXAMPLE.read_text().replace('[methods.wfbp-a2a]\nstack = "horovod"\n', ""))
    other = _predict(tmp_path, "--cluster", str(plain), "--nodes", "1,2,8", "--schemes", "ddp,wfbp-a2a,bsp-a2a")
    a, b = (d.set_index(["workers", "scheme"])["iter_s_median"] for d in (df, other))
    for n in (8, 16, 64):
        assert a[(n, "wfbp-a2a")] > b[(n, "wfbp-a2a")] and a[(n, "bsp-a2a")] == b[(n, "bsp-a2a")]


@pytest.mark.parametrize(
    "text, needle",
    [
        ("gpus_per_node = 4\n[links]\ninter = 'eth-10g'\nintra = 'pcie3-x16'\nrack = 2\n", "unknown key rack"),
        ("gpus_per_node = 4\n[links]\ninter = 'eth-10g'\n", "[links] needs inter and intra"),
        (
            "gpus_per_node = 0\n[links]\ninter = 'eth-10g'\nintra = 'pcie3-x16'\n",
            "gpus_per_node must be an integer >= 1",
        ),
        ("gpus_per_node = 4\n[links]\ninter = 'eth-9g'\nintra = 'pcie3-x16'\n", "unknown link preset 'eth-9g'"),
        (
            "gpus_per_node = 4\n[links]\ninter = { rate_gbit_s = 10 }\nintra = 'pcie3-x16'\n",
            "needs rate_gbit_s and latency_s",
        ),
        (
            "gpus_per_node = 4\n[links]\ninter = 'eth-10g'\nintra = 'pcie3-x16'\n[methods.mgwfbp]\nstack = 'hvd'\n",
            "stack 'hvd' is not defined",
        ),
        (
            "gpus_per_node = 4\n[links]\ninter = 'eth-10g'\nintra = 'pcie3-x16'\n[stacks.hvd]\nwarp_s = 1\n",
            "stacks.hvd: unknown key warp_s",
        ),
        (
            "gpus_per_node = 4\n[links]\ninter = 'eth-10g'\nintra = 'pcie3-x16'\n[stacks.hvd]\nhook_s = -1\n",
            "stacks.hvd.hook_s must be a finite number >= 0",
        ),
        (
            "gpus_per_node = 4\n[links]\ninter = 'eth-10g'\nintra = 'pcie3-x16'\n[methods.ddp]\nknobs = { nope = 1 }\n",
            "methods.ddp: unknown knob nope",
        ),
        ("gpus_per_node = 4\nmax_nodes = 2\n[links]\ninter = 'eth-10g'\nintra = 'pcie3-x16'\n", "up to max_nodes = 2"),
        (
            "gpus_per_node = 4\nallreduce = 'tree'\n[links]\ninter = 'eth-10g'\nintra = 'pcie3-x16'\n",
            "allreduce must be one of ring, hierarchical",
        ),
        ("gpus_per_node = [4\n", "is not TOML"),
    ],
)
def test_a_bad_cluster_file_is_one_line_naming_the_file_and_key(tmp_path, text, needle):
    f = tmp_path / "mine.toml"
    f.write_text(text)
    r = CliRunner().invoke(cli, [*PRED, "--cluster", str(f), "--nodes", "1,4"])
    assert r.exit_code == 2, r.output
    assert needle in r.output and str(f) in r.output and len(r.output.strip().splitlines()) == 1, r.output
