"""CellSpec's fields are declared once (issue 24): the sweep file's shared settings and `ddlbench run`'s
options are made from them, with the same names, defaults and help."""

from __future__ import annotations

import dataclasses

from harness.cli.commands.run import command as run_command
from harness.cli.options import RUN_DEFAULTS, RUN_FIELDS, SERVERS_HELP, SPELLING
from harness.contracts.cell import CellSettings, CellSpec
from harness.experiment.sweep import SweepConfig, sweep_from_dict
from harness.schemes.knobs import field_docs


def test_sweep_settings_are_the_cells():
    settings = {f.name: f.default for f in dataclasses.fields(CellSettings)}
    sweep = {f.name: f.default for f in dataclasses.fields(SweepConfig)}
    assert {k: sweep[k] for k in settings} == settings
    cfg = sweep_from_dict({"workloads": ["resnet50-tiny"], "iters": 7, "timeout_s": 9})
    assert (cfg.iters, cfg.timeout_s) == (7, 9)


def test_run_options_are_the_cells_fields():
    options = {p.name: p for p in run_command.params}
    docs = field_docs(CellSpec)
    declared = {f.name: f.default for f in dataclasses.fields(CellSpec)}
    for name in RUN_FIELDS:
        opt = options[name]
        assert opt.opts == [SPELLING.get(name, "--" + name.replace("_", "-"))]
        if name == "servers":  # the option every command shares: 0 is the cell's "one per worker node", refused
            assert opt.help.startswith(SERVERS_HELP) and opt.default is None and opt.type.min == 1
            continue
        assert opt.help == docs[name]
        want = RUN_DEFAULTS.get(name, declared[name])
        assert opt.required if want is dataclasses.MISSING else opt.default == want
    assert {f.name for f in dataclasses.fields(CellSettings)} <= set(RUN_FIELDS)
