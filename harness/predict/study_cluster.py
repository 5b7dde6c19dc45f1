"""The study's testbed and configuration as model inputs (Shi, Tang, Chu et al., "A Quantitative Survey
of Communication Optimizations in Distributed Deep Learning", IEEE Network 2021, arXiv 2005.13247),
taken from its description and the public code and documentation it ran, never from its measured
throughputs (docs/ARCHITECTURE.md, "Predictor"). Every value carries its source here; nothing is
fitted to an expected output.

The study's code is github.com/HKBU-HPML/ddl-benchmarks (cited below as ddl-benchmarks/<path>).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.contracts.planning import MB
from harness.sim.network import Link, get_link
from harness.predict.predictor import Network

NODES = 8
"""Worker hosts (8 nodes x 4 GPUs = 32 GPUs, the paper's testbed)."""
GPUS_PER_NODE = 4
"""GeForce RTX 2080 Ti per node, one worker process per GPU."""
SERVER_HOSTS = NODES
"""Dedicated parameter-server hosts: one per four GPU workers (nworkers / 4 = 8 for 32 GPUs; the
paper's PS set-up, ddl-benchmarks/byteps/launch.sh: servers on hosts gpu9.. apart from the workers)."""

TCP_MESSAGE_S = 20e-6
"""Host CPU per TCP message (kernel stack: system calls, copies, wake-ups); see TCP_MESSAGE_SOURCE."""
TCP_MESSAGE_SOURCE = (
    "measured, not from a datasheet: `python scripts/reference/tcp_message_cost.py` (64-byte messages, TCP_NODELAY, "
    "loopback: no NIC and no wire, so what remains is the stack) on the development VM, 2026-11-23: min "
    "20.1 us one way over 5 x 20000 round trips with both cores busy (load ~3); on the quiet machine "
    "30.7 and 33.5 us (load 1.6 and 0.7), where the receiver sleeps between messages and each message "
    "pays its wake-up. NCCL's socket transport polls from proxy threads (no sleep between messages), so "
    "the busy-core figure is kept as the closer one; the spread 20-34 us is this value's uncertainty, "
    "and both are upper bounds for a C transport (the caller is Python)")

HOST_PCIE = Link(
    "pcie3-x16-host", 96.0, 2e-6,
    "the one PCI Express 3.0 x16 path a node's 4 GPUs and its NIC share to host memory: 8 GT/s x 16 lanes "
    "x 128b/130b = 15.75 GB/s per direction (PCI-SIG PCIe 3.0), ~12 GB/s achievable by DMA (CUDA "
    "bandwidthTest, pinned memory, typical); the topology is BytePS's 'PCIe-switch architecture - 4 GPUs "
    "under one PCIe switch' where 'the communication is bottlenecked by internal PCI-e switches, not the "
    "network' (bytedance/byteps docs/performance.md). GeForce cards have no peer-to-peer over PCIe and no "
    "GPUDirect RDMA (NVIDIA GPUDirect RDMA documentation: Tesla and Quadro only), so NCCL stages every "
    "intra-node hop and every NIC transfer through host memory")

GPU_VIA_HOST = Link(
    "gpu-via-host-pcie3", 96.0, 4e-6,
    "one GPU's own PCIe 3.0 x16 link (~12 GB/s per direction, as pcie3-x16); a hop to a peer GPU is two "
    "DMAs through host memory (NCCL's SHM transport when P2P is unavailable), ~2 us each (pcie3-x16)")

IB_RDMA = get_link("ib-100g")  # EDR InfiniBand, verbs: the stack is in the NIC (per_message_s = 0)

IPOIB = Link(
    "ipoib-100g", 25.0, get_link("ib-100g").latency_s,
    "TCP over the same EDR fabric (NCCL_IB_DISABLE=1 with NCCL_SOCKET_IFNAME=ib0, ddl-benchmarks/"
    "mgwfbp/horovod_mpi_cj.sh, rdma=2): wire latency of the IB fabric (ib-100g) plus the kernel TCP stack "
    "per message (TCP_MESSAGE_S); rate ~25 Gb/s, the kernel TCP stack with one core per connection far below "
    "RDMA (typical IPoIB measurements; BytePS docs/best-practice.md: with TCP at >= 25 Gb/s 'a single TCP "
    "connection' may not fill the link) - a typical figure, not measured on the study's hosts",
    per_message_s=TCP_MESSAGE_S)

ETH_10G = Link(
    "eth-10g", 9.4, 5e-6,
    "10 GbE (NCCL_IB_DISABLE=1 over the Ethernet NIC, ddl-benchmarks/mgwfbp/horovod_mpi_cj.sh, rdma=0): "
    "TCP payload 1460/1538 of the 10 Gb/s line rate = ~9.4 Gb/s; wire latency ~5 us (two 1538-byte "
    "serialisations at 10 Gb/s = 2.5 us, a switch hop and the NICs' DMA, ~1 us each: an estimate) plus the "
    "kernel TCP stack per message (TCP_MESSAGE_S)",
    per_message_s=TCP_MESSAGE_S)

# MG-WFBP's merge model in the study's code: alpha/beta hard-coded per worker count and network in
# ddl-benchmarks/mgwfbp/hv_distributed_optimizer.py (_generate_groups_mgwfbp; measured by its authors on
# other clusters); the 56 Gb IB table is used when the benchmark gets --rdma, which horovod_mpi_cj.sh passes
# for IB RDMA (rdma=1) and for IPoIB (rdma=2), the 10 GbE table for 10 GbE (rdma=0). Values at P = 32.
MGWFBP_AB_56G_IB = (0.00040632079996292579, 1.5 * 3.2713239529771973e-10)
"""(alpha s, beta s/B) of the 56 Gb IB table at 32 workers: 4.06e-4 s, 4.91e-10 s/B."""
MGWFBP_AB_10GBE = (0.0013476410788581382 * 3, 8.643300782166769e-10)
"""(alpha s, beta s/B) of the 10 GbE table at 32 workers: 4.04e-3 s, 8.64e-10 s/B."""

BYTESCHEDULER_A2A = {"partition_mb": 4_000_000 / MB, "credit_mb": 16_000_000 / MB}
"""ByteScheduler on Horovod: BYTESCHEDULER_PARTITION=4000000, BYTESCHEDULER_CREDIT=16000000,
BYTESCHEDULER_CREDIT_TUNING=0 (ddl-benchmarks/bytescheduler/horovod_mpi_cj.sh)."""
BYTEPS_PARTITION_MB = 4_096_000 / MB
"""BYTEPS_PARTITION_BYTES=4096000 (ddl-benchmarks/byteps/launch.sh)."""
BYTEPS_SCHEDULE_CREDIT_MB = (GPUS_PER_NODE + 1) * 4_096_000 / MB
"""BytePS's scheduled queue (BYTEPS_SERVER_ENABLE_SCHEDULE=1 for ByteScheduler-PS) admits partition
size x (local GPUs + 1) bytes when BYTEPS_SCHEDULING_CREDIT is unset (byteps/common/scheduled_queue.cc:
credit_in_partition = GetGroupSize() + 1)."""


@dataclass(frozen=True)
class StudyNetwork:
    network: Network
    """The links as the predictor takes them."""
    mgwfbp_ab: tuple[float, float]
    """The alpha/beta the study's MG-WFBP planned with on this network."""
    knobs: dict = field(default_factory=dict)
    """method -> knobs as the study ran it (filled by study_networks)."""


def _knobs(mgwfbp_ab: tuple[float, float]) -> dict:
    """Each study method's knobs on a network whose MG-WFBP table is `mgwfbp_ab`. BSP-A2A (fusion
    threshold 2^29 elements: every gradient in one buffer after backward) and WFBP-A2A (threshold 0:
    one all-reduce per tensor) are the schemes' own schedules (ddl-benchmarks/mgwfbp/imagenet_benchmark.py
    --threshold); PS methods push one copy per node (BytePS's local reduce)."""
    ps = {"partition_mb": BYTEPS_PARTITION_MB, "local_reduce": 1}
    return {
        "mgwfbp": {"alpha_s": mgwfbp_ab[0], "beta_s_per_mb": mgwfbp_ab[1] * MB},
        "bytescheduler-a2a": dict(BYTESCHEDULER_A2A),
        "bsp-ps": dict(ps), "wfbp-ps": dict(ps),
        "bytescheduler-ps": {**ps, "credit_mb": BYTEPS_SCHEDULE_CREDIT_MB},
    }


def study_networks() -> list[StudyNetwork]:
    """The study's three networks, in its order: IB RDMA, IPoIB, 10 GbE."""
    out = []
    for label, inter, ab in (("ib-100g", IB_RDMA, MGWFBP_AB_56G_IB), ("ipoib-100g", IPOIB, MGWFBP_AB_56G_IB),
                             ("eth-10g", ETH_10G, MGWFBP_AB_10GBE)):
        out.append(StudyNetwork(Network(label, inter, GPU_VIA_HOST, host=HOST_PCIE), ab, _knobs(ab)))
    return out


def assumptions() -> list[str]:
    """One line per preset: name, value, source (for the report's assumptions section)."""
    lines = [f"{NODES} worker nodes x {GPUS_PER_NODE} GPUs, {SERVER_HOSTS} dedicated server hosts "
             f"(one per four GPU workers)",
             f"TCP per-message host cost {TCP_MESSAGE_S * 1e6:.0f} us: {TCP_MESSAGE_SOURCE}"]
    for link in (HOST_PCIE, GPU_VIA_HOST, IB_RDMA, IPOIB, ETH_10G):
        lines.append(f"`{link.name}`: {link.rate_gbit_s:g} Gb/s, latency {link.latency_s * 1e6:g} us"
                     + (f" + {link.per_message_s * 1e6:g} us per message" if link.per_message_s else "")
                     + f" - {link.source}")
    lines.append(f"MG-WFBP plans with alpha {MGWFBP_AB_56G_IB[0]:.3g} s, beta {MGWFBP_AB_56G_IB[1]:.3g} s/B on "
                 f"IB and IPoIB, alpha {MGWFBP_AB_10GBE[0]:.3g} s, beta {MGWFBP_AB_10GBE[1]:.3g} s/B on 10 GbE")
    lines.append("ByteScheduler-A2A partition 4,000,000 B, credit 16,000,000 B; PS partition 4,096,000 B, "
                 f"ByteScheduler-PS credit {BYTEPS_SCHEDULE_CREDIT_MB * MB:,.0f} B")
    return lines
