"""The study's testbed and configuration as a cluster the predictor runs (docs/ARCHITECTURE.md,
"Predictor"): 1, 2, 4 or 8 nodes x 4 GeForce RTX 2080 Ti on PCIe 3.0 x16 (no peer-to-peer, no GPUDirect
RDMA), on 100 Gb/s InfiniBand with RDMA, TCP over it (IPoIB) or 10 GbE; the all-reduce methods on
Horovod 0.19 over NCCL 2.4, ByteScheduler on that Horovod, the parameter-server methods on BytePS 0.2 with
one dedicated server host per worker node. Every number is an input (harness/study/inputs.py: value, range,
source, its data in harness/study/inputs/*.toml) or a named constant below that cites its source;
`study_network(values, family, nodes)` builds the network for any set of values (typed, `StudyValues`, or input
name -> value), so an interval is the same construction on sampled values. Nothing is fitted to the study's
results.

The study's code is github.com/HKBU-HPML/ddl-benchmarks (ddl-benchmarks/<path> below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from harness.core.errors import UserError
from harness.grouping.cost import MB
from harness.predict.predictor import SEVEN_METHODS, Network
from harness.sim.costs import BytePSCosts, Stack
from harness.sim.links import AlphaBeta, Link, slower_of
from harness.study.bytescheduler_plugin import PluginRun
from harness.study.inputs import INPUTS, StudyValues, Values
from harness.study.mgwfbp import study_merge

FAMILIES = ("ib-100g", "ipoib-100g", "eth-10g")
"""The study's networks, in its order; the rows' `network` label."""
NODE_COUNTS = (1, 2, 4, 8)
"""Worker nodes at each size the study ran: 4, 8, 16, 32 GPUs."""
GPUS_PER_NODE = 4
"""GeForce RTX 2080 Ti per node, one worker process per GPU."""
NODES = 8
"""The largest size (32 GPUs)."""
SERVER_HOSTS = NODES
"""Dedicated parameter-server hosts at 32 GPUs: one per worker node (ddl-benchmarks/byteps/launch.sh:
nservers = nworkers / 4, servers on hosts gpu9.. apart from the workers). At 4 GPUs BytePS runs no server at
all (global.cc: a job is distributed only with more than one worker node)."""

MGWFBP_TABLES = {
    # ddl-benchmarks/mgwfbp/hv_distributed_optimizer.py _generate_groups_mgwfbp: (alpha s, beta s/B) per worker
    # count, hard-coded from its authors' other clusters; the 56 Gb table when the benchmark gets --rdma (the IB
    # and the IPoIB runs, horovod_mpi_cj.sh rdma=1 and 2), the 10 Gb table otherwise. The factors `* 3`, `1.5 *`
    # and `1.8 *` are the authors' own corrections of their fits, written so in that code (its earlier version
    # holds the 16-worker fits without them): kept as they wrote them, not ours
    "56g": {
        2: (2.554691138304671e-06, 9.837548167872609e-11),
        4: (4.204298980348825e-05, 2.0589360830118177e-10),
        8: (9.75367204301171e-05, 3.0568230536676206e-10),
        16: (0.00023583677659915685 * 3, 4.0594787739537565e-10),
        32: (0.00040632079996292579, 1.5 * 3.2713239529771973e-10),
        64: (0.00080632079996292579, 1.8 * 3.2713239529771973e-10),
    },
    "10g": {
        2: (2.554691138304671e-06, 9.837548167872609e-11),
        4: (4.204298980348825e-05, 2.0589360830118177e-10),
        8: (0.0005230272768511732, 8.570746975492128e-10),
        16: (0.0009080981007148093, 7.395651186836712e-10),
        32: (0.0013476410788581382 * 3, 8.643300782166769e-10),
        64: (0.0023476410788581382 * 3, 9.643300782166769e-10),
    },
}
MGWFBP_TABLE_OF = {"ib-100g": "56g", "ipoib-100g": "56g", "eth-10g": "10g"}
MGWFBP_FIT_ALPHA_S = {
    # the same code's start-up intercepts (alpha, s) before the authors' correction factors above: what they
    # measured on their 56 Gb IB and 10 GbE clusters, per worker count (the report's start-up table sets them
    # beside this model's)
    "56g": {4: 4.204298980348825e-05, 8: 9.75367204301171e-05, 16: 0.00023583677659915685, 32: 0.00040632079996292579},
    "10g": {4: 4.204298980348825e-05, 8: 0.0005230272768511732, 16: 0.0009080981007148093, 32: 0.0013476410788581382},
}
NCCL_TREE_BETA_RATIO = 1.5
"""NCCL's tree moves a byte at 2/3 of its ring's bandwidth: its beta is the ring's times 1.5 (NCCL 2.4.8
src/init.cc, ncclTreeThreshold's tuning model; inputs/nccl.toml, nccl_tree_level_s)."""
NCCL24_RING_HOP_S = 6e-6
"""NCCL 2.4.8's own tuning model (src/init.cc ncclTreeThreshold): ring latency per rank, s. The start-up table
compares with it; the model's own hop is the input nccl_hop_s."""
NCCL24_TREE_LEVEL_S = 15e-6
"""NCCL 2.4.8's tuning model: tree latency per inter-node level, s (the input nccl_tree_level_s is the model's)."""
NCCL24_TREE_HOP_S = 4e-6
"""NCCL 2.4.8's tuning model: tree latency per intra-node hop, s."""
STARTUP_MESSAGE_BYTES = 4096
"""The all-reduce whose time stands for a collective's start-up in the start-up table: 4 KB, small enough that
NCCL runs its tree and the bytes take under a microsecond."""
NEGOTIATION_COLLECTIVES = 3
"""Small MPI collectives of one Horovod 0.19 coordinator round besides its Gatherv (common/mpi/mpi_controller.cc:
RecvReadyTensors' MPI_Gather of the lengths, SendFinalTensors' two MPI_Bcast)."""
FP32_BYTES = 4
"""Bytes per parameter: ByteScheduler counts its partition and credit in parameters, the study's are fp32."""
BYTESCHEDULER_PS_CREDIT_MB = 64.0
"""ByteScheduler-PS's credit knob as the rows record it (knobs_json). On the study's BytePS stack it moves no
number: that method runs BytePS with the servers' scheduling (BYTEPS_SERVER_ENABLE_SCHEDULE=1,
ddl-benchmarks/byteps/launch.sh) and WFBP-PS's worker pipeline, which takes no credit (harness/sim/bytescheduler.py
bytescheduler_ps; worker queues first in, first out, BYTEPS_SCHEDULING_CREDIT unset). No source states 64 MiB:
before 8faf23e it was BytePS's default worker credit, partition x (local GPUs + 1) (scheduled_queue.cc)."""
PRESET_PREFIX = "study-"
"""`ddlbench predict --network study-ib-100g` (study-ipoib-100g, study-eth-10g): this cluster, whole."""


def check_size(nodes: int, g: int = GPUS_PER_NODE) -> None:
    """The study's MG-WFBP runs take their alpha/beta from a table per worker count: the sizes it has."""
    if nodes * g not in MGWFBP_TABLES["56g"]:
        sizes = ", ".join(str(k // g) for k in MGWFBP_TABLES["56g"] if k % g == 0)
        raise UserError(
            f"--nodes {nodes}: the study's cluster is modelled at {sizes} nodes of {g} GPUs (its "
            f"MG-WFBP alpha/beta table, ddl-benchmarks/mgwfbp/hv_distributed_optimizer.py, has no "
            f"entry for {nodes * g} workers); pick one of those"
        )


@dataclass(frozen=True)
class StudyNetwork:
    network: Network
    """The links, the NCCL cost at this size and each method's software stack, as the predictor takes them."""
    knobs: dict
    """method -> knobs as the study ran it."""
    nodes: int
    """Worker nodes."""


def _levels(k: int) -> int:
    return math.ceil(math.log2(k)) if k > 1 else 0


def links(v: Values, family: str) -> tuple[Link, Link]:
    """(between nodes, between the GPUs of a node) for these input values."""
    v = StudyValues.of(v)
    net = v.network
    intra = Link(
        "shm-via-host",
        v.nccl.shm_edge_gbyte_s * 8,
        v.nccl.nccl_hop_s,
        "a ring edge through host memory (NCCL SHM, no P2P): inputs shm_edge_gbyte_s, nccl_hop_s",
    )
    if family == "ib-100g":
        inter = Link("ib-100g", net.ib_gbyte_s * 8, net.ib_latency_s, "EDR verbs, no GPUDirect: inputs ib_*")
    elif family == "ipoib-100g":
        inter = Link(
            "ipoib-100g",
            net.ipoib_gbit_s,
            net.ib_latency_s,
            "TCP over EDR: inputs ipoib_gbit_s",
            per_message_s=net.tcp_message_s,
        )
    elif family == "eth-10g":
        inter = Link(
            "eth-10g", net.eth_gbit_s, net.eth_latency_s, "10 GbE TCP: inputs eth_*", per_message_s=net.tcp_message_s
        )
    else:
        raise ValueError(f"unknown study network {family!r}")
    return inter, intra


def nccl_allreduce(v: Values, inter: Link, intra: Link, nodes: int, g: int = GPUS_PER_NODE) -> AlphaBeta:
    """NCCL's all-reduce on `nodes` x `g` GPUs: a ring paced by its slowest edge and its slowest step
    (Patarasuk and Yuan 2009; nccl-tests' 2(N-1)/N), and for small messages across nodes NCCL's tree
    (2.4: latency per level, 2/3 of the ring's bandwidth)."""
    v = StudyValues.of(v)
    N = nodes * g
    if N <= 1:
        return AlphaBeta(0.0, 0.0)
    # a node's host path carries, per ring step, each of its GPUs' hops through host memory up and down (g of
    # them on one node; g - 1 and the NIC's read and write across nodes): g + 1 chunks each way
    host, launch, steps = v.nccl.host_path_gbyte_s * 1e9, v.nccl.nccl_launch_s, 2 * (N - 1)
    if nodes == 1:
        return AlphaBeta(launch + steps * intra.message_s, steps / N / min(intra.bytes_per_s, host / g))
    # across nodes the ring runs step by step at the slower of the node's own path (its hops through host memory,
    # the host path) and the wire: a GPU shared with compute slows the first, not the wire (issue 50)
    node = AlphaBeta(launch + steps * intra.message_s, steps / N / min(intra.bytes_per_s, host / (g + 1)))
    ring = slower_of(node, AlphaBeta(launch + steps * inter.message_s, steps / N / inter.bytes_per_s))
    tree_a = v.nccl.nccl_launch_s + 2 * (
        _levels(nodes) * max(v.nccl.nccl_tree_level_s, inter.message_s) + (g - 1) * intra.message_s
    )
    tree = AlphaBeta(tree_a, NCCL_TREE_BETA_RATIO * ring.beta_s_per_byte)
    return replace(ring, small=tree)


def mpi_collective_s(v: Values, family: str, nodes: int, g: int = GPUS_PER_NODE) -> float:
    """One small MPI collective across the job: a tree inside each node (vader) and across the nodes (IB
    verbs for the IB and IPoIB runs, TCP for 10 GbE: ddl-benchmarks/mgwfbp/horovod_mpi_cj.sh)."""
    v = StudyValues.of(v)
    level = v.horovod.mpi_tcp_level_s if family == "eth-10g" else v.horovod.mpi_verbs_level_s
    return _levels(g) * v.horovod.mpi_shm_level_s + _levels(nodes) * level


def mpi_gatherv_s(v: Values, family: str, nodes: int, g: int = GPUS_PER_NODE) -> float:
    """MPI_Gatherv of the ranks' small request lists to rank 0: Open MPI 4.0 has no tree for it (coll/tuned
    leaves gatherv to coll/basic's linear algorithm: the root receives every other rank's message itself), so
    it costs one level's latency plus the root's CPU for each of the N - 1 messages."""
    v = StudyValues.of(v)
    hv = v.horovod
    level = hv.mpi_tcp_level_s if family == "eth-10g" else hv.mpi_verbs_level_s
    per_message = hv.mpi_tcp_message_s if family == "eth-10g" else hv.mpi_verbs_message_s
    remote = (nodes - 1) * g
    return (level if nodes > 1 else hv.mpi_shm_level_s) + remote * per_message + (g - 1) * hv.mpi_shm_level_s


def horovod_negotiation_s(v: Values, family: str, nodes: int, g: int = GPUS_PER_NODE) -> float:
    """One Horovod 0.19 coordinator round with the response cache off (common/mpi/mpi_controller.cc:
    RecvReadyTensors = MPI_Gather of the lengths + MPI_Gatherv of the request lists; SendFinalTensors = two
    MPI_Bcast), plus the coordinator's own work; grows with the ring through the linear Gatherv."""
    v = StudyValues.of(v)
    return (
        v.horovod.hvd_coordinator_s
        + NEGOTIATION_COLLECTIVES * mpi_collective_s(v, family, nodes, g)
        + mpi_gatherv_s(v, family, nodes, g)
    )


def stacks(v: Values, family: str, nodes: int, g: int = GPUS_PER_NODE) -> dict[str, Stack]:
    """The software each of the study's methods ran on, with its costs at this size."""
    v = StudyValues.of(v)
    hv, bs, bp = v.horovod, v.bytescheduler, v.byteps
    mpi = mpi_collective_s(v, family, nodes, g)
    python = dict(hook_s=hv.py_hook_s, copy_bytes_per_s=hv.d2d_gbyte_s * 1e9, copy_launch_s=hv.copy_launch_s)
    # every stack: its optimizer's Python ops and memory passes, and the GPU it shares with its communication
    gpu = dict(
        py_op_s=v.optimizer.py_op_s,
        opt_bytes_per_s=hv.d2d_gbyte_s * 1e9,
        overlap_compute_slowdown=v.gpu.overlap_compute_slowdown,
        overlap_comm_slowdown=v.gpu.overlap_comm_slowdown,
    )
    # BSP, WFBP, MG-WFBP: Horovod with fusion, response cache and cycle time off (their benchmark scripts):
    # every round a coordinator negotiation (MPI Gather, Gatherv and two Bcasts) back to back; BERT on
    # transformers' AdamW (ddl-benchmarks/mgwfbp/bert_benchmark.py), ResNet-50 on SGD
    horovod_off = Stack(
        launch_s=hv.hvd_launch_s,
        negotiation_s=horovod_negotiation_s(v, family, nodes, g),
        mgwfbp_merge=study_merge,
        optimizer=(("img", "sgd"), ("seq", "adamw")),
        **python,
        **gpu,
    )
    # ByteScheduler's PyTorch plugin on Horovod's defaults: 5 ms cycle, 64 MiB fusion, the cache's bit-vector
    # all-reduce per tick (a small MPI all-reduce: a reduce up the tree and a broadcast down it, 2 collectives'
    # levels); rank 0 schedules, the others hand partitions over from their hooks; Python threads sharing the GIL
    # (harness/study/bytescheduler_plugin.py); BERT on torch.optim.Adam
    # (ddl-benchmarks/bytescheduler/bert_benchmark.py), stepped per parameter by the plugin's poller
    bytescheduler = Stack(
        launch_s=hv.hvd_launch_s,
        cycle_s=hv.hvd_cycle_s,
        cycle_sync_s=2 * mpi,
        fusion_bytes=hv.hvd_fusion_mb * MB,
        partition_cpu_s=bs.bs_partition_cpu_s,
        param_step_s=bs.bs_param_step_s,
        consensus=False,
        credit_overshoot=True,
        leader_only=True,
        bytescheduler_run=PluginRun,
        gil_forced_s=bs.py_switch_interval_s + bs.gil_forced_extra_s,
        gil_release_s=bs.gil_handoff_s,
        task_py_s=bs.bs_task_py_s,
        done_py_s=bs.bs_done_py_s,
        param_scan_s=bs.bs_scan_step_s,
        gil_waits_per_hook=bs.gil_convoy_share * bs.gil_acquires_per_hook,
        fwd_gil_per_layer=bs.gil_convoy_share * bs.fwd_gil_per_layer,
        fwd_gap_s=bs.bs_fwd_gap_s,
        optimizer=(("img", "sgd"), ("seq", "adam")),
        **python,
        **gpu,
    )
    nic = 0.0  # the inter-node link's rate, but for IPoIB (below)
    if family == "ib-100g":  # ps-lite's RDMA van
        message, stream, van = bp.rdma_message_s, math.inf, math.inf
    elif family == "ipoib-100g":  # ZMQ over TCP on ib0, one connection per worker-server pair, several at once
        message, stream, van = v.network.tcp_message_s, bp.ipoib_stream_gbit_s * 1e9 / 8, bp.zmq_van_gbyte_s * 1e9
        nic = bp.ipoib_nic_gbit_s * 1e9 / 8
    else:  # one 10 GbE stream fills the port; ZMQ over TCP at a 1500-byte MTU
        message, stream, van = v.network.tcp_message_s, math.inf, bp.eth_van_gbyte_s * 1e9
    # BytePS: BERT on plain SGD (ddl-benchmarks/byteps/bert_benchmark.py: optim.SGD(lr=0.01))
    byteps = Stack(
        hook_s=hv.py_hook_s,
        copy_bytes_per_s=hv.d2d_gbyte_s * 1e9,
        copy_launch_s=hv.copy_launch_s,
        optimizer=(("img", "sgd"), ("seq", "sgd")),
        **gpu,
        byteps=BytePSCosts(
            signal_s=bp.byteps_signal_s,
            nccl_call_s=v.nccl.nccl_launch_s,
            copy_bytes_per_s=bp.pinned_copy_gbyte_s * 1e9,
            sum_bytes_per_s=bp.server_sum_gbyte_s * 1e9,
            recv_s=bp.server_recv_s,
            message_s=message,
            stream_bytes_per_s=stream,
            van_bytes_per_s=van,
            nic_bytes_per_s=nic,
            nccl_edge_bytes_per_s=bp.byteps_nccl_edge_gbyte_s * 1e9,
            host_bytes_per_s=v.nccl.host_path_gbyte_s * 1e9,
        ),
    )
    # BytePS under the three PS methods, ByteScheduler's plugin under its all-reduce method, Horovod under the rest
    out = {
        m: byteps if m.endswith("-ps") else bytescheduler if m == "bytescheduler-a2a" else horovod_off
        for m in SEVEN_METHODS
    }
    if not v.optimizer.per_method_optimizer:  # every method steps the single-GPU run's optimizer (study_compute)
        out = {m: replace(st, optimizer=()) for m, st in out.items()}
    return out


def knobs(v: Values, family: str, nodes: int, g: int = GPUS_PER_NODE) -> dict:
    """Each method's knobs as the study ran it at this size."""
    v = StudyValues.of(v)
    check_size(nodes, g)
    alpha, beta = MGWFBP_TABLES[MGWFBP_TABLE_OF[family]][nodes * g]
    bs = v.bytescheduler
    return {
        "mgwfbp": {"alpha_s": alpha, "beta_s_per_mb": beta * MB},
        "bytescheduler-a2a": {
            "partition_mb": bs.bs_partition_elems * FP32_BYTES / MB,
            "credit_mb": bs.bs_credit_elems * FP32_BYTES / MB,
        },
        **ps_knobs(v),
    }


def ps_knobs(v: Values) -> dict:
    """The PS methods' knobs as the study ran them, the same at every size (BytePS's partition, its local reduce;
    ByteScheduler-PS's credit)."""
    v = StudyValues.of(v)
    ps = {"partition_mb": v.byteps.byteps_partition_bytes / MB, "local_reduce": 1}
    return {
        "bsp-ps": dict(ps),
        "wfbp-ps": dict(ps),
        "bytescheduler-ps": {**ps, "credit_mb": BYTESCHEDULER_PS_CREDIT_MB},
    }


def network(v: Values, family: str, nodes: int, g: int = GPUS_PER_NODE) -> Network:
    """The study's network `family` at `nodes` x `g` GPUs for input values `v`, at any size (its links, NCCL's
    all-reduce, every method's stack); `study_network` adds the methods' knobs at the study's sizes."""
    v = StudyValues.of(v)
    inter, intra = links(v, family)
    ab = nccl_allreduce(v, inter, intra, nodes, g)
    return Network(family, inter, intra, measured={nodes * g: ab}, stacks=stacks(v, family, nodes, g))


def study_network(v: Values, family: str, nodes: int, g: int = GPUS_PER_NODE) -> StudyNetwork:
    """The study's network `family` at `nodes` x `g` GPUs for input values `v`, with its methods' knobs."""
    return StudyNetwork(network(v, family, nodes, g), knobs(v, family, nodes, g), nodes)


def startup_rows(v: Values | None = None) -> list[dict]:
    """Per-collective start-up on the study's cluster at every size, as this model composes it (NCCL's
    all-reduce of 4 KB: its tree across nodes; Horovod's negotiation round with the cache off; its launch),
    beside the authors' own fits of all-reduce start-up (ddl-benchmarks/mgwfbp/hv_distributed_optimizer.py:
    the intercept they measured on their 56 Gb IB and 10 GbE clusters, and the value their table holds after
    their own correction factor) and NCCL 2.4.8's tuning model (src/init.cc ncclTreeThreshold: ring 6 us per
    rank, tree 15 us per inter-node level and 4 us per intra-node hop)."""
    v = StudyValues.of(v or INPUTS.nominal())
    launch = v.horovod.hvd_launch_s
    rows = []
    for family in FAMILIES:
        table = MGWFBP_TABLE_OF[family]
        for nodes in NODE_COUNTS:
            n = nodes * GPUS_PER_NODE
            inter, intra = links(v, family)
            nccl = nccl_allreduce(v, inter, intra, nodes).time_s(STARTUP_MESSAGE_BYTES)
            neg = horovod_negotiation_s(v, family, nodes)
            ring = NCCL24_RING_HOP_S * (n - 1)
            tree = NCCL24_TREE_LEVEL_S * math.log2(nodes) + NCCL24_TREE_HOP_S * (GPUS_PER_NODE - 1)
            rows.append(
                {
                    "network": family,
                    "workers": n,
                    "nccl_s": nccl,
                    "negotiation_s": neg,
                    "launch_s": launch,
                    "model_s": nccl + neg + launch,
                    "nccl24_model_s": ring if nodes < 2 or ring <= tree else tree,
                    "authors_fit_s": MGWFBP_FIT_ALPHA_S[table][n],
                    "authors_table_s": MGWFBP_TABLES[table][n][0],
                    "authors_cluster": "56 Gb IB" if table == "56g" else "10 GbE",
                }
            )
    return rows
