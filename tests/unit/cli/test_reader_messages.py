"""The three config readers' error messages, pinned word for word (issue 59 item 3: one loader, every message
unchanged): the sweep file (harness/experiment/sweep.py), a cluster file (harness/predict/cluster_file.py) and the
study's inputs (harness/study/inputs.py). Each case is a file's text and the exact line its reader raises; `{t}`
stands for the folder the file lies in, and the key lists the code declares are filled in from the code, so a
field added elsewhere does not break a pin.

    pytest -q tests/unit/cli/test_reader_messages.py
"""

from __future__ import annotations

import dataclasses
import shutil

import pytest
import tomllib

from harness.core.errors import UserError
from harness.experiment.sweep import SweepConfig, load_sweep
from harness.predict.cluster_file import LINK_KEYS, STACK_FIELDS, read_cluster_file
from harness.sim.links import LINKS
from harness.study.inputs import FOLDER, GROUPS, load
from helpers import ROOT

FILLED = {
    "sweep_keys": ", ".join(sorted(f.name for f in dataclasses.fields(SweepConfig))),
    "link_keys": ", ".join(sorted(LINK_KEYS)),
    "stack_fields": ", ".join(sorted(STACK_FIELDS)),
    "presets": ", ".join(sorted(LINKS)),
    "groups": ", ".join(GROUPS),
}
"""The lists a message names that the code declares (a sweep's keys, a link's and a stack's keys, the presets)."""
BINARY = b"\xff\xfe\x00garbage"
UTF8 = "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"

SWEEP = {
    "missing": (
        None,
        "sweep file {t}/missing.yaml does not exist or is not a file; give the path of a YAML sweep file",
    ),
    "a_directory": (
        "DIR",
        "sweep file {t}/a_directory.yaml does not exist or is not a file; give the path of a YAML sweep file",
    ),
    "binary": (
        BINARY,
        f"cannot read sweep file {{t}}/binary.yaml: {UTF8}; check its permissions and that it is a text (YAML) file",
    ),
    "not_yaml": (
        "workloads: [resnet50-tiny\nschemes: [ddp]\n",
        "sweep file {t}/not_yaml.yaml is not valid YAML at line 2: fix its syntax",
    ),
    "empty": ("", "sweep file {t}/empty.yaml is empty: give at least `workloads:` (see sweeps/quick.yaml)"),
    "a_list": ("- resnet50-tiny\n", "{t}/a_list.yaml must be a mapping of settings (name:, workloads:, ...), not list"),
    "a_word": ("hello\n", "{t}/a_word.yaml must be a mapping of settings (name:, workloads:, ...), not str"),
    "unknown_keys": (
        "workloads: [resnet50-tiny]\nshemes: [ddp]\nworkres: [1]\n",
        "unknown key(s) shemes, workres in {t}/unknown_keys.yaml: known keys are {sweep_keys}",
    ),
    "workloads_empty": (
        "workloads: []\n",
        "`workloads:` in {t}/workloads_empty.yaml is empty: give at least one value, e.g. workloads: [resnet50-tiny]",
    ),
    "workers_float": (
        "workers: [1.5]\n",
        "`workers:` in {t}/workers_float.yaml must hold integers >= 1, got 1.5; fix the sweep file",
    ),
    "workers_bool": (
        "workers: [true]\n",
        "`workers:` in {t}/workers_bool.yaml must hold integers >= 1, got True; fix the sweep file",
    ),
    "servers_zero": (
        "servers: [0]\n",
        "`servers:` in {t}/servers_zero.yaml must hold integers >= 1 (parameter-server processes; omit `servers:` "
        "for one per worker node), got 0; fix the sweep file",
    ),
    "dtype_number": (
        "dtype: [32]\n",
        "`dtype:` in {t}/dtype_number.yaml must hold fp32 and/or bf16, got 32; fix the sweep file",
    ),
    "labels_scalar_number": (
        "labels: 5\n",
        "`labels:` in {t}/labels_scalar_number.yaml must hold network labels, got 5; fix the sweep file",
    ),
    "iters_word": ("iters: ten\n", "`iters: 'ten'` in {t}/iters_word.yaml must be an integer; fix the sweep file"),
    "warmup_bool": ("warmup: true\n", "`warmup: True` in {t}/warmup_bool.yaml must be an integer; fix the sweep file"),
    "timeout_word": (
        "timeout_s: fast\n",
        "`timeout_s: 'fast'` in {t}/timeout_word.yaml must be a number of seconds; fix the sweep file",
    ),
    "device_number": ("device: 3\n", "`device: 3` in {t}/device_number.yaml must be a name; fix the sweep file"),
    "baseline_word": (
        "baseline: maybe\n",
        "`baseline: 'maybe'` in {t}/baseline_word.yaml must be true or false; fix the sweep file",
    ),
    "name_number": ("name: 5\n", "`name: 5` in {t}/name_number.yaml must be a name; fix the sweep file"),
    "name_dotdot": (
        "name: ../../evil\n",
        "sweep name '../../evil' is not allowed: use 1-64 letters, digits, '-' or '_' (e.g. cpu-tiny)",
    ),
    "trace_float": (
        "trace: 1.5\n",
        "`trace: 1.5` in {t}/trace_float.yaml must be a number of iterations to trace (0 = off); fix the sweep file",
    ),
    "testbed_number": (
        "testbed: 5\n",
        "`testbed: 5` in {t}/testbed_number.yaml must be a mapping {{hosts: N, rate: R}}; fix the sweep file",
    ),
    "networks_list": (
        "networks: [a]\n",
        "`networks: ['a']` in {t}/networks_list.yaml must be a mapping name -> {{rate: R}}; fix the sweep file",
    ),
    "knobs_list": (
        "knobs: [1]\n",
        "`knobs: [1]` in {t}/knobs_list.yaml must be a mapping scheme -> {{knob: value}}; fix the sweep file",
    ),
    "knobs_scheme_scalar": (
        "knobs: {ddp: 5}\n",
        "`knobs: {{ddp: 5}}` in {t}/knobs_scheme_scalar.yaml must map each scheme to {{knob: value}}, e.g. "
        "knobs: {{ddp: {{bucket_cap_mb: [1, 25]}}}}",
    ),
}

L = "[links]\ninter = 'eth-10g'\nintra = 'pcie3-x16'\n"
G = "gpus_per_node = 4\n"
CLUSTER = {
    "missing": (None, " does not exist: write one (examples/cluster-25g.toml shows every key)"),
    "not_toml": ("gpus_per_node = [4\n", " is not TOML (Unclosed array (at end of document)): fix its syntax"),
    "binary": (BINARY, f" is not TOML ({UTF8}): fix its syntax"),
    "unknown_top": (
        G + "rack = 2\nrow = 1\n" + L,
        ": unknown key rack, row (known: allreduce, gpus_per_node, label, links, max_nodes, methods, server_hosts, "
        "servers, stacks)",
    ),
    "label_number": ("label = 5\n" + G + L, ": label must be a non-empty string, got 5"),
    "label_blank": ("label = '  '\n" + G + L, ": label must be a non-empty string, got '  '"),
    "gpus_missing": (L, ": gpus_per_node must be an integer >= 1, got None"),
    "gpus_zero": ("gpus_per_node = 0\n" + L, ": gpus_per_node must be an integer >= 1, got 0"),
    "gpus_bool": ("gpus_per_node = true\n" + L, ": gpus_per_node must be an integer >= 1, got True"),
    "gpus_float": ("gpus_per_node = 4.0\n" + L, ": gpus_per_node must be an integer >= 1, got 4.0"),
    "max_nodes_zero": (G + "max_nodes = 0\n" + L, ": max_nodes must be an integer >= 1, got 0"),
    "servers_negative": (G + "servers = -1\n" + L, ": servers must be an integer >= 1, got -1"),
    "servers_float": (G + "servers = 2.5\n" + L, ": servers must be an integer >= 1, got 2.5"),
    "allreduce_tree": (G + "allreduce = 'tree'\n" + L, ": allreduce must be one of ring, hierarchical, got 'tree'"),
    "server_hosts_word": (
        G + "server_hosts = 'here'\n" + L,
        ": server_hosts must be one of dedicated, colocated, got 'here'",
    ),
    "links_number": (G + "links = 5\n", ": [links] must be a table"),
    "links_unknown": (G + L + "extra = 'eth-10g'\n", ": [links]: unknown key extra (known: inter, intra)"),
    "links_half": (
        G + "[links]\ninter = 'eth-10g'\n",
        ": [links] needs inter and intra (each a preset name or a table of {link_keys})",
    ),
    "links_none": (G, ": [links] needs inter and intra (each a preset name or a table of {link_keys})"),
    "inter_unknown_preset": (
        G + "[links]\ninter = 'eth-9g'\nintra = 'pcie3-x16'\n",
        ": links.inter: unknown link preset 'eth-9g': known presets are {presets} (or a table of {link_keys})",
    ),
    "inter_number": (
        G + "[links]\ninter = 5\nintra = 'pcie3-x16'\n",
        ": links.inter must be a link preset name or a table of {link_keys}",
    ),
    "inter_unknown_key": (
        G + "[links]\ninter = { rate_gbit_s = 10, latency_s = 1e-6, mtu = 9000 }\nintra = 'pcie3-x16'\n",
        ": links.inter: unknown key mtu (known: {link_keys})",
    ),
    "inter_no_latency": (
        G + "[links]\ninter = { rate_gbit_s = 10 }\nintra = 'pcie3-x16'\n",
        ": links.inter needs rate_gbit_s and latency_s",
    ),
    "inter_rate_zero": (
        G + "[links]\ninter = { rate_gbit_s = 0, latency_s = 1e-6 }\nintra = 'pcie3-x16'\n",
        ": links.inter.rate_gbit_s must be > 0",
    ),
    "inter_rate_word": (
        G + "[links]\ninter = { rate_gbit_s = 'x', latency_s = 1e-6 }\nintra = 'pcie3-x16'\n",
        ": links.inter.rate_gbit_s must be a finite number >= 0, got 'x'",
    ),
    "intra_latency_negative": (
        G + "[links]\ninter = 'eth-10g'\nintra = { rate_gbit_s = 10, latency_s = -1 }\n",
        ": links.intra.latency_s must be a finite number >= 0, got -1",
    ),
    "intra_per_message_nan": (
        G + "[links]\ninter = 'eth-10g'\nintra = { rate_gbit_s = 10, latency_s = 0, per_message_s = nan }\n",
        ": links.intra.per_message_s must be a finite number >= 0, got nan",
    ),
    "stacks_number": (G + "stacks = 5\n" + L, ": [stacks] must be a table"),
    "stack_number": (G + L + "[stacks]\nhvd = 5\n", ": stacks.hvd must be a table of stack costs ({stack_fields})"),
    "stack_unknown_key": (
        G + L + "[stacks.hvd]\nwarp_s = 1\n",
        ": stacks.hvd: unknown key warp_s (known: {stack_fields})",
    ),
    "stack_negative": (
        G + L + "[stacks.hvd]\nhook_s = -1\n",
        ": stacks.hvd.hook_s must be a finite number >= 0, got -1",
    ),
    "stack_inf": (G + L + "[stacks.hvd]\nhook_s = inf\n", ": stacks.hvd.hook_s must be a finite number >= 0, got inf"),
    "stack_bool_word": (
        G + L + "[stacks.hvd]\ncopy_back = 'yes'\n",
        ": stacks.hvd.copy_back must be true or false, got 'yes'",
    ),
    "stack_number_bool": (
        G + L + "[stacks.hvd]\nhook_s = true\n",
        ": stacks.hvd.hook_s must be a finite number >= 0, got True",
    ),
    "methods_number": (G + "methods = 5\n" + L, ": [methods] must be a table"),
    "method_number": (G + L + "[methods]\nddp = 5\n", ": methods.ddp must be a table (stack = NAME, knobs = {{...}})"),
    "method_unknown_key": (
        G + L + "[methods.ddp]\nframework = 'x'\n",
        ": methods.ddp: unknown key framework (known: knobs, stack)",
    ),
    "method_stack_none_defined": (
        G + L + "[methods.mgwfbp]\nstack = 'hvd'\n",
        ": methods.mgwfbp: stack 'hvd' is not defined: add [stacks.hvd] or pick one of none defined",
    ),
    "method_stack_undefined": (
        G + L + "[stacks.hvd]\nhook_s = 1\n[stacks.bps]\nhook_s = 1\n[methods.mgwfbp]\nstack = 'hv'\n",
        ": methods.mgwfbp: stack 'hv' is not defined: add [stacks.hv] or pick one of hvd, bps",
    ),
    "method_knobs_number": (
        G + L + "[methods.ddp]\nknobs = 5\n",
        ": methods.ddp: knobs must be a table, e.g. knobs = {{ bucket_cap_mb = 50 }}",
    ),
    "method_knob_unknown": (
        G + L + "[methods.ddp]\nknobs = { nope = 1 }\n",
        ": methods.ddp: unknown knob nope for method 'ddp': its knobs are bucket_cap_mb, broadcast_buffers",
    ),
    "method_knob_bad": (
        G + L + "[methods.ddp]\nknobs = { bucket_cap_mb = -1 }\n",
        ": methods.ddp: knob bucket_cap_mb=-1 of scheme 'ddp' must be > 0 (DDP gradient bucket size, MB (DDP's "
        "default 25)); fix it in the sweep file or --knob",
    ),
}
"""A cluster file's text and the end of its line; every line starts `cluster file {t}/<case>.toml`."""


def _write(folder, name: str, content):
    path = folder / name
    if content == "DIR":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    return path


@pytest.mark.parametrize("case", sorted(SWEEP))
def test_each_bad_sweep_file_says_todays_line(tmp_path, case):
    content, line = SWEEP[case]
    with pytest.raises(UserError) as e:
        load_sweep(_write(tmp_path, f"{case}.yaml", content))
    assert str(e.value) == line.format(t=tmp_path, **FILLED)


@pytest.mark.parametrize("case", sorted(CLUSTER))
def test_each_bad_cluster_file_says_todays_line(tmp_path, case):
    content, tail = CLUSTER[case]
    path = _write(tmp_path, f"{case}.toml", content)
    with pytest.raises(UserError) as e:
        read_cluster_file(path)
    assert str(e.value) == f"cluster file {tmp_path}/{case}.toml" + tail.format(**FILLED)


def test_a_cluster_file_past_its_max_nodes_says_todays_line(tmp_path):
    entry = read_cluster_file(_write(tmp_path, "small.toml", G + "max_nodes = 2\n" + L))
    entry.check_nodes(2)
    with pytest.raises(UserError) as e:
        entry.check_nodes(3)
    assert str(e.value) == f"--nodes 3: cluster file {tmp_path}/small.toml is modelled up to max_nodes = 2"


def test_good_files_read_as_before(tmp_path):
    sweep = load_sweep(
        _write(tmp_path, "s.yaml", "name: quick\nworkers: 2\nservers: [1, 2]\nknobs: {ddp: {bucket_cap_mb: [1, 25]}}\n")
    )
    assert sweep == SweepConfig(name="quick", workers=(2,), servers=(1, 2), knobs={"ddp": {"bucket_cap_mb": [1, 25]}})
    entry = read_cluster_file(ROOT / "examples" / "cluster-25g.toml")
    assert entry.summary == f"lab-25g: nodes of 8 GPUs on eth-25g ({ROOT / 'examples' / 'cluster-25g.toml'})"
    assert entry.gpus_per_node == 8
    plain = read_cluster_file(_write(tmp_path, "plain.toml", G + "servers = 0\n" + L))
    assert plain.summary == f"plain: nodes of 4 GPUs on eth-10g ({tmp_path}/plain.toml)"
    own = G + "[links]\ninter = { rate_gbit_s = 25, latency_s = 1e-6 }\nintra = 'pcie3-x16'\n"
    assert read_cluster_file(_write(tmp_path, "own.toml", own)).summary == (
        f"own: nodes of 4 GPUs on links.inter ({tmp_path}/own.toml)"
    )


GPU = "gpu.toml"
EXTRA = '\n[gpu_extra_s]\nvalue = 1.0\nlow = 1.0\nhigh = 1.0\nunit = "s"\nkind = "code"\nwhat = "w"\nsource = "s"\n'
STUDY = {
    "stray_file": (
        lambda d: (d / "extra.toml").write_text(""),
        ValueError,
        "{folder}: extra.toml is read by no one; its inputs go into one of {groups} (and a field of that dataclass "
        "in harness/study/inputs.py)",
    ),
    "extra_input": (
        lambda d: (d / GPU).write_text((d / GPU).read_text() + EXTRA),
        ValueError,
        "inputs/gpu.toml holds overlap_compute_slowdown, overlap_comm_slowdown, gpu_extra_s; GpuValues has the "
        "fields overlap_compute_slowdown, overlap_comm_slowdown: the two list the same inputs in the same order",
    ),
    "misspelt_key": (
        lambda d: (d / GPU).write_text((d / GPU).read_text().replace("value = 0.05", "vaule = 0.05")),
        ValueError,
        "inputs/gpu.toml [overlap_compute_slowdown]: an input holds value, low, high, unit, kind, what, source; "
        "missing ['value'], unknown ['vaule']",
    ),
    "input_not_table": (
        lambda d: (d / GPU).write_text(
            "overlap_compute_slowdown = 5\n[overlap_comm_slowdown]"
            + (d / GPU).read_text().split("[overlap_comm_slowdown]")[1]
        ),
        ValueError,
        "inputs/gpu.toml [overlap_compute_slowdown]: an input holds value, low, high, unit, kind, what, source; "
        "missing ['high', 'kind', 'low', 'source', 'unit', 'value', 'what'], unknown []",
    ),
    "unknown_source": (
        lambda d: (d / GPU).write_text((d / GPU).read_text().replace("${overlap}", "${overlapp}")),
        ValueError,
        "inputs/gpu.toml [overlap_compute_slowdown]: its source names ${{overlapp}}, not a key of sources.toml "
        "(nccl_pcie, ipoib_stream, gil_microbenchmark, overlap, server_loop)",
    ),
    "stray_dollar": (
        lambda d: (d / GPU).write_text((d / GPU).read_text().replace("${overlap}", "$5 ${overlap}")),
        ValueError,
        "inputs/gpu.toml [overlap_compute_slowdown]: a $ in its source names no source (Invalid placeholder in "
        "string: line 1, col 1); write a literal $ as $$",
    ),
    "value_word": (
        lambda d: (d / GPU).write_text((d / GPU).read_text().replace("value = 0.05", 'value = "x"')),
        ValueError,
        "input overlap_compute_slowdown: value = 'x' is not a number",
    ),
    "high_bool": (
        lambda d: (d / GPU).write_text((d / GPU).read_text().replace("high = 0.25", "high = true")),
        ValueError,
        "input overlap_compute_slowdown: high = True is not a number",
    ),
    "not_toml": (
        lambda d: (d / GPU).write_text((d / GPU).read_text() + "\n[broken\n"),
        tomllib.TOMLDecodeError,
        "Expected ']' at the end of a table declaration (at line 23, column 8)",
    ),
    "no_sources": (
        lambda d: (d / "sources.toml").unlink(),
        FileNotFoundError,
        "[Errno 2] No such file or directory: '{folder}/sources.toml'",
    ),
    "no_group_file": (
        lambda d: (d / GPU).unlink(),
        FileNotFoundError,
        "[Errno 2] No such file or directory: '{folder}/gpu.toml'",
    ),
}
"""An edit of a copy of the study's data files, the exception `load` raises and its text (`{folder}`: the copy).
A shipped file's syntax or absence is the developer's to fix: those stay Python's own exceptions."""


@pytest.mark.parametrize("case", sorted(STUDY))
def test_each_study_data_file_out_of_step_says_todays_line(tmp_path, case):
    edit, kind, line = STUDY[case]
    folder = tmp_path / "inputs"
    shutil.copytree(FOLDER, folder)
    edit(folder)
    with pytest.raises(kind) as e:
        load(folder)
    assert type(e.value) is kind
    assert str(e.value) == line.format(folder=folder, **FILLED)
