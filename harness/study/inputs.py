"""Every input of the study's cluster (harness/study/cluster.py), with its value, range and source
(docs/ARCHITECTURE.md, "Predictor"), read from the data files beside this module (harness/study/inputs/*.toml, one
per stack), and the same inputs typed (`StudyValues`) for the cost formulas. The study: Shi, Tang, Chu et al., "A
Quantitative Survey of Communication Optimizations in Distributed Deep Learning", IEEE Network 2021, arXiv
2005.13247; its code github.com/HKBU-HPML/ddl-benchmarks (cited as ddl-benchmarks/<path>), run with PyTorch 1.4,
NCCL 2.4, Open MPI 4.0.1, Horovod 0.19, BytePS 0.2 and ByteScheduler. None of its measured throughputs is an input.

Kinds: code (read in the software the study ran), doc (its documentation, a paper, a datasheet), measured
(here, the command in the source), typical (measurements on other hardware), estimate (reasoned; the
reasoning is in the source). An input known exactly has low == high.

A data file holds one table per input, in the order the inputs are drawn (Latin-hypercube samples take one
stream of random numbers in that order: moving an entry changes every interval):

    [shm_edge_gbyte_s]
    value = 5.0
    low = 3.9
    high = 7.3
    unit = "GB/s"
    kind = "typical"
    what = "rate of one ring edge between two GPUs of a node through host memory (NCCL's SHM transport)"
    source = "${nccl_pcie}"       # a source several inputs cite, once in sources.toml, with text of its own around

    INPUTS["nccl_hop_s"].value                 # the generic machinery: names -> values (harness/predict/inputs.py)
    v = StudyValues.of(INPUTS.nominal())        # the cost formulas: v.nccl.nccl_hop_s
    v.flat() == INPUTS.nominal()                # and back

Adding an input: its table in the stack's file, a float field of the same name in that stack's dataclass below
(`load` refuses a file and its dataclass that disagree), then the formula that reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from string import Template
from typing import get_type_hints

from harness.core.config import Kind, checked, load_document
from harness.predict.inputs import Input, Inputs

FOLDER = Path(__file__).with_name("inputs")
"""The data files (shipped with the package: pyproject.toml, package-data)."""
SOURCES = "sources"
"""The file of sources several inputs cite (`[sources]`, key -> text), named in a source as ${key}."""
KEYS = ("value", "low", "high", "unit", "kind", "what", "source")
"""What each input's table holds, no more and no less."""
STUDY = Kind(
    "toml",
    {
        "stray": "{folder}: {stray}.toml is read by no one; its inputs go into one of {groups} (and a field of that "
        "dataclass in harness/study/inputs.py)",
        "order": "{where} holds {held}; {typ} has the fields {declared}: the two list the same inputs in the "
        "same order",
        "keys": "{where} [{name}]: an input holds {keys}; missing {missing}, unknown {unknown}",
        "source_key": "{where} [{name}]: its source names ${{{key}}}, not a key of {sources}.toml ({shared})",
        "source_dollar": "{where} [{name}]: a $ in its source names no source ({error}); write a literal $ as $$",
        "number": "input {name}: {key} = {value!r} is not a number",
    },
    error=ValueError,
)
"""The study's data files: TOML, each problem's line, raised as ValueError when this module is imported
(harness/core/config.py: one loader, one error style). A shipped file that is missing or not TOML raises Python's
own exception: no template."""


@dataclass(frozen=True)
class NcclValues:
    """NCCL 2.4 inside a node, through host memory (inputs/nccl.toml: each field's unit, range, what and source)."""

    shm_edge_gbyte_s: float
    nccl_hop_s: float
    nccl_launch_s: float
    nccl_tree_level_s: float
    host_path_gbyte_s: float


@dataclass(frozen=True)
class NetworkValues:
    """Between nodes: EDR InfiniBand (verbs, IPoIB), 10 GbE, kernel TCP (inputs/network.toml)."""

    ib_gbyte_s: float
    ib_latency_s: float
    ipoib_gbit_s: float
    eth_gbit_s: float
    eth_latency_s: float
    tcp_message_s: float


@dataclass(frozen=True)
class HorovodValues:
    """Horovod 0.19 and Open MPI under it; the Python hook and device copies of every stack (inputs/horovod.toml)."""

    mpi_shm_level_s: float
    mpi_verbs_level_s: float
    mpi_tcp_level_s: float
    mpi_verbs_message_s: float
    mpi_tcp_message_s: float
    hvd_coordinator_s: float
    hvd_launch_s: float
    hvd_cycle_s: float
    hvd_fusion_mb: float
    py_hook_s: float
    d2d_gbyte_s: float
    copy_launch_s: float


@dataclass(frozen=True)
class ByteSchedulerValues:
    """ByteScheduler on Horovod: its units, its scheduler and its plugin's Python threads under the GIL
    (inputs/bytescheduler.toml)."""

    bs_partition_elems: float
    bs_credit_elems: float
    bs_partition_cpu_s: float
    bs_param_step_s: float
    bs_fwd_gap_s: float
    py_switch_interval_s: float
    gil_forced_extra_s: float
    gil_handoff_s: float
    bs_task_py_s: float
    bs_done_py_s: float
    bs_scan_step_s: float
    fwd_gil_per_layer: float
    gil_acquires_per_hook: float
    gil_convoy_share: float


@dataclass(frozen=True)
class OptimizerValues:
    """The optimizers: Python per torch op, which one each script and the single-GPU run stepped
    (inputs/optimizer.toml)."""

    py_op_s: float
    calib_adam_share: float
    per_method_optimizer: float


@dataclass(frozen=True)
class GpuValues:
    """A GeForce GPU shared by communication and compute (inputs/gpu.toml)."""

    overlap_compute_slowdown: float
    overlap_comm_slowdown: float


@dataclass(frozen=True)
class BytePSValues:
    """BytePS 0.2: partitions, in-node NCCL, copies, servers and transports (inputs/byteps.toml)."""

    byteps_partition_bytes: float
    byteps_nccl_edge_gbyte_s: float
    byteps_signal_s: float
    pinned_copy_gbyte_s: float
    server_sum_gbyte_s: float
    server_recv_s: float
    rdma_message_s: float
    ipoib_stream_gbit_s: float
    ipoib_nic_gbit_s: float
    zmq_van_gbyte_s: float
    eth_van_gbyte_s: float


@dataclass(frozen=True)
class ComputeValues:
    """The single-GPU iteration (inputs/compute.toml)."""

    compute_scale: float


@dataclass(frozen=True)
class StudyValues:
    """One value per input of the study's cluster, grouped by stack; the groups in the data files' order, a
    group's fields in its file's order, each field named as its input."""

    nccl: NcclValues
    """inputs/nccl.toml"""
    network: NetworkValues
    """inputs/network.toml"""
    horovod: HorovodValues
    """inputs/horovod.toml"""
    bytescheduler: ByteSchedulerValues
    """inputs/bytescheduler.toml"""
    optimizer: OptimizerValues
    """inputs/optimizer.toml"""
    gpu: GpuValues
    """inputs/gpu.toml"""
    byteps: BytePSValues
    """inputs/byteps.toml"""
    compute: ComputeValues
    """inputs/compute.toml"""

    @classmethod
    def from_flat(cls, values: Mapping[str, float]) -> StudyValues:
        """From input name -> value (every input, no other name)."""
        names = [f.name for typ in GROUPS.values() for f in fields(typ)]
        missing = [n for n in names if n not in values]
        unknown = sorted(set(values) - set(names))
        if missing or unknown:
            said = [
                f"{what} {', '.join(listed)}" for what, listed in (("missing", missing), ("unknown", unknown)) if listed
            ]
            raise ValueError(f"study values: {'; '.join(said)} (the inputs are harness/study/inputs/*.toml)")
        return cls(**{group: typ(**{f.name: values[f.name] for f in fields(typ)}) for group, typ in GROUPS.items()})

    @classmethod
    def of(cls, values: StudyValues | Mapping[str, float]) -> StudyValues:
        """`values` typed: as they are, or from input name -> value."""
        return values if isinstance(values, StudyValues) else cls.from_flat(values)

    def flat(self) -> dict[str, float]:
        """Input name -> value, in the inputs' order."""
        return {f.name: getattr(g, f.name) for g in (getattr(self, group) for group in GROUPS) for f in fields(g)}


Values = StudyValues | Mapping[str, float]
"""Input values as the cluster's functions take them: typed, or input name -> value (converted at their entry)."""
GROUPS: dict[str, type] = get_type_hints(StudyValues)
"""Data file (without .toml) -> its dataclass, in the order the inputs are read: the order `StudyValues` names them."""


def _number(name: str, key: str, x) -> float:
    return float(checked(x, (int, float), STUDY, "number", name=name, key=key))


def _input(name: str, table: dict, shared: dict[str, str], where: str) -> Input:
    if not isinstance(table, dict) or set(table) != set(KEYS):
        have = set(table) if isinstance(table, dict) else set()
        STUDY.fail(
            "keys",
            where=where,
            name=name,
            keys=", ".join(KEYS),
            missing=sorted(set(KEYS) - have),
            unknown=sorted(have - set(KEYS)),
        )
    try:
        source = Template(table["source"]).substitute(shared)
    except KeyError as e:
        STUDY.fail("source_key", where=where, name=name, key=e.args[0], sources=SOURCES, shared=", ".join(shared))
    except ValueError as e:
        STUDY.fail("source_dollar", where=where, name=name, error=e)
    return Input(
        name,
        *(_number(name, k, table[k]) for k in ("value", "low", "high")),
        table["unit"],
        table["what"],
        source,
        table["kind"],
    )


def load(folder: Path = FOLDER) -> Inputs:
    """The inputs of the data files in `folder`: GROUPS' files in their order, each file's entries in theirs.
    A file that is not a group's, or whose inputs are not its dataclass's fields in their order, is refused."""
    stray = sorted({p.stem for p in folder.glob("*.toml")} - {*GROUPS, SOURCES})
    if stray:
        STUDY.fail("stray", folder=folder, stray=", ".join(stray), groups=", ".join(GROUPS))
    shared = load_document(folder / f"{SOURCES}.toml", STUDY)["sources"]
    items = []
    for group, typ in GROUPS.items():
        where = f"{folder.name}/{group}.toml"
        tables = load_document(folder / f"{group}.toml", STUDY)
        declared = [f.name for f in fields(typ)]
        if list(tables) != declared:
            STUDY.fail("order", where=where, held=", ".join(tables), typ=typ.__name__, declared=", ".join(declared))
        items += [_input(name, t, shared, where) for name, t in tables.items()]
    return Inputs(items)


INPUTS = load()
"""The study cluster's inputs."""
