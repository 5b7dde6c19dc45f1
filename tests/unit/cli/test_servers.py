"""`--servers` has one meaning and one default in every command that takes it (README, "Parameter servers"):
N >= 1 parameter-server processes of a PS cell, one per worker node when left out, 0 refused; a sweep file's
`servers:` the same."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from harness.advise.workflow import where
from harness.cli.main import cli
from harness.cli.options import SERVERS_HELP
from harness.commbench.driver import commbench_cell
from harness.contracts.cell import CellSpec
from harness.experiment.cells import resolve
from harness.experiment.sweep import expand, sweep_from_dict, with_overrides

COMMANDS = ("run", "sweep", "predict", "advise", "commbench")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_says_the_same_of_servers(command):
    res = CliRunner().invoke(cli, [command, "--help"], terminal_width=400)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert " ".join(SERVERS_HELP.split()) in text and "x>=1" in text


def test_left_out_it_is_one_per_worker_node_in_cells_sweeps_and_commbench():
    ps = dict(workload="resnet50-tiny", scheme="bsp-ps", workers=4, device="cpu")
    assert resolve(CellSpec(**ps)).servers == 1  # one box: one node
    assert resolve(CellSpec(**ps, nodes=2)).servers == 2
    assert resolve(CellSpec(**ps, nodes=2, servers=3)).servers == 3
    assert resolve(CellSpec(**{**ps, "scheme": "ddp"}, nodes=2)).servers == 0  # no PS: none
    cfg = sweep_from_dict({"workloads": ["resnet50-tiny"], "schemes": ["bsp-ps"], "workers": [2, 4], "baseline": False})
    spread = {c.workers: c.servers for c in expand(cfg, nodes_for=lambda w: w // 2)}
    assert spread == {2: 1, 4: 2}
    assert {c.servers for c in expand(with_overrides(cfg, servers=3), nodes_for=lambda w: w // 2)} == {3}
    assert commbench_cell(4, "pushpull", [1024], 1, 0, nodes=2).servers == 2
    assert commbench_cell(4, "pushpull", [1024], 1, 0, servers=1, nodes=2).servers == 1
    assert commbench_cell(4, "allreduce", [1024], 1, 0, nodes=2).servers == 0
    assert where(2, 0, testbed=False).layout.max_servers == 1  # advise on one box: PS candidates try 1


def test_a_run_records_the_servers_in_its_cell_id():
    cell = resolve(CellSpec(workload="resnet50-tiny", scheme="wfbp-ps", workers=4, nodes=2, device="cpu"))
    assert re.search(r"\.w4\.s2\.", cell.cell_id)
