"""The parameter server as BytePS runs it (issue 16): workers of one node sum each partition among
themselves, one copy per node is pushed and pulled, and the result is sent inside the node; the push
duty of the partitions is spread over the node's workers (docs/ARCHITECTURE.md, "Backend").

The layout is pure (tested as data); the lossless runs are real multi-process cells on one box, with
4 workers as 2 nodes x 2 (the local launcher gives each rank its NODE_RANK), 1 and 2 servers."""

from __future__ import annotations

import json

import pytest

from harness.backends.torch_dist.ps_layout import PSLayout
from harness.contracts.cell import CellSpec
from helpers import SMALL, STEPS, check, run_and_load, shared_reference


def test_layout_one_push_per_node_and_the_duty_spread_over_local_ranks():
    numel = [1000, 1000, 500, 500, 250, 250]
    layout = PSLayout.build(numel, servers=2, node_of_worker=[0, 0, 1, 1], local_reduce=True)
    assert layout.groups == ((0, 1), (2, 3))
    for k in range(len(numel)):
        pushers = layout.pushers(k)
        assert len(pushers) == 2 and pushers[0] in (0, 1) and pushers[1] in (2, 3)
    pushed = layout.bytes_pushed()
    assert sum(pushed.values()) == 2 * 4 * sum(numel)  # one copy per node, not per worker
    assert pushed[0] == pushed[1] == pushed[2] == pushed[3]  # the duty spread evenly by bytes
    flat = PSLayout.build(numel, servers=2, node_of_worker=[0, 0, 1, 1], local_reduce=False)
    assert flat.groups == ((0,), (1,), (2,), (3,))
    assert sum(flat.bytes_pushed().values()) == 4 * 4 * sum(numel)  # every worker its whole gradient
    assert layout.server_of == flat.server_of


def test_layout_uneven_nodes_and_labels():
    layout = PSLayout.build([10, 20, 30], servers=1, node_of_worker=[5, 5, 5, 9], local_reduce=True)
    assert layout.groups == ((0, 1, 2), (3,))
    assert all(layout.owner(k, 3) == 3 for k in range(3))
    assert sorted(layout.owner(k, 0) for k in range(3)) == [0, 1, 2]


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["bsp-ps", "wfbp-ps", "bytescheduler-ps"])
@pytest.mark.parametrize("servers", [1, 2])
def test_local_reduce_is_lossless(tmp_path, monkeypatch, scheme, servers):
    wl = "bert-base-tiny"
    cell = CellSpec(
        workload=wl,
        scheme=scheme,
        workers=4,
        nodes=2,
        servers=servers,
        device="cpu",
        timeout_s=240,
        knobs={"local_reduce": 1},
        **SMALL[wl],
    )
    params = run_and_load(tmp_path, monkeypatch, cell)
    check(params, shared_reference(wl, 4, SMALL[wl]["batch"], SMALL[wl]["seq_len"], STEPS), wl)


@pytest.mark.slow
def test_local_reduce_plan_recorded(tmp_path, monkeypatch):
    from harness.experiment.cells import resolve
    from harness.spawner.cell import launch_cell

    monkeypatch.setenv("DDLBENCH_STEPS", "3")
    cell = resolve(
        CellSpec(
            workload="bert-base-tiny",
            scheme="bsp-ps",
            workers=4,
            nodes=2,
            servers=1,
            device="cpu",
            timeout_s=240,
            knobs={"local_reduce": 1},
            batch=2,
            seq_len=16,
        )
    )
    result = json.loads(launch_cell(cell, tmp_path / "c").read_text())
    assert result["plan"]["ps_groups"] == [[0, 1], [2, 3]]


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["wfbp-ps", "bytescheduler-ps"])
def test_staged_pushes_are_lossless(tmp_path, monkeypatch, scheme):
    """The GPU's way of pushing (staging.py: the copy to host memory on a side stream, the push started by
    a sender thread once it is done), forced on CPU: the same training, bitwise the same on every rank."""
    monkeypatch.setenv("DDLBENCH_PS_DEFER", "1")
    wl = "bert-base-tiny"
    cell = CellSpec(workload=wl, scheme=scheme, workers=4, nodes=2, servers=1, device="cpu", timeout_s=240, **SMALL[wl])
    params = run_and_load(tmp_path, monkeypatch, cell)
    check(params, shared_reference(wl, 4, SMALL[wl]["batch"], SMALL[wl]["seq_len"], STEPS), wl)
