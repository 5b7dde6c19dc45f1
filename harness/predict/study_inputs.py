"""Every input of the study's cluster (harness/predict/study_cluster.py), with its value, range and source
(docs/ARCHITECTURE.md, "Predictor"). The study: Shi, Tang, Chu et al., "A Quantitative Survey of
Communication Optimizations in Distributed Deep Learning", IEEE Network 2021, arXiv 2005.13247; its code
github.com/HKBU-HPML/ddl-benchmarks (cited as ddl-benchmarks/<path>), run with PyTorch 1.4, NCCL 2.4,
Open MPI 4.0.1, Horovod 0.19, BytePS 0.2 and ByteScheduler. None of its measured throughputs is an input.

Kinds: code (read in the software the study ran), doc (its documentation, a paper, a datasheet), measured
(here, the command in the source), typical (measurements on other hardware), estimate (reasoned; the
reasoning is in the source). An input known exactly has low == high.
"""

from __future__ import annotations

from harness.predict.inputs import Input, Inputs

NCCL_PCIE = ("low: NVIDIA/nccl issue 384 (NCCL 2.4.8, PCIe Gen3 x16, NCCL_P2P_DISABLE=1, SHM transport): all-reduce "
             "busbw 3.9 GB/s; value: NCCL 2.4.8's own model of a non-NVLink ring, 5 GB/s (src/init.cc); high: the "
             "study's authors' own 4-GPU all-reduce cost, hard-coded in ddl-benchmarks/mgwfbp/hv_distributed_optimizer.py "
             "(_generate_groups_mgwfbp, P=4: beta 2.06e-10 s/B, i.e. a ring edge of 1.5/beta = 7.3 GB/s); GeForce has "
             "no P2P (NVIDIA/nccl-tests issue 117: 'the 2080ti has never supported p2p')")

INPUTS = Inputs([
    # --- NCCL inside a node: four GeForce GPUs without peer-to-peer, staging through host memory --------
    Input("shm_edge_gbyte_s", 5.0, 3.9, 7.3, "GB/s",
          "rate of one ring edge between two GPUs of a node through host memory (NCCL's SHM transport)",
          NCCL_PCIE, "typical"),
    Input("nccl_hop_s", 6e-6, 2e-6, 8e-6, "s",
          "latency of one ring step (a hop through host memory, LL protocol)",
          "NCCL 2.4.8 src/init.cc: ring latency 6 us per hop in its tuning model; NCCL 2.5.6 src/graph/tuning.cc: "
          "1.0-5.7 us per step (LL to Simple, PCI)", "code"),
    Input("nccl_launch_s", 12e-6, 6e-6, 20e-6, "s",
          "fixed cost of one NCCL collective: kernel launch and enqueue",
          "nccl-tests' smallest all-reduce on PCIe machines, ~17 us for 8 B (NVIDIA/nccl-tests issue 293), less "
          "the ring steps; a CUDA kernel launch ~5 us", "typical"),
    Input("nccl_tree_level_s", 15e-6, 8e-6, 20e-6, "s",
          "NCCL's tree: latency per inter-node level, for the small all-reduces it runs as a tree",
          "NCCL 2.4.8 src/init.cc ncclTreeThreshold: tree latency 15 us per inter-node level (+4 us per "
          "intra-node hop), tree bandwidth 2/3 of the ring's", "code"),
    Input("host_path_gbyte_s", 24.0, 12.0, 48.0, "GB/s",
          "a node's PCIe path between its 4 GPUs and NIC and host memory, per direction (every NCCL hop and NIC "
          "transfer crosses it: no P2P, no GPUDirect RDMA)",
          "the study does not describe its boards; low: 4 GPUs and the NIC under one PCIe 3.0 x16 switch uplink, "
          "~12 GB/s by DMA (BytePS docs/performance.md, 'PCIe-switch architecture'); value: a dual-socket "
          "4-GPU server, two x16 uplinks (one per socket); high: each GPU on an x16 root port of its own "
          "(4 x 12 GB/s); PCI-SIG PCIe 3.0: 8 GT/s x 16 lanes x 128b/130b = 15.75 GB/s raw (estimate)", "estimate"),
    # --- between nodes -----------------------------------------------------------------------------------
    Input("ib_gbyte_s", 10.0, 8.0, 12.2, "GB/s",
          "NCCL's rate through one node's 100 Gb/s EDR NIC, no GPUDirect RDMA (staged in pinned host memory)",
          "NVIDIA/nccl-tests issue 29 (maintainer): 12.2 GB/s 'is as good as you can get' on 100 Gb/s; without "
          "GPUDirect (GeForce: NVIDIA GPUDirect RDMA documentation; the study's IPoIB runs also set "
          "NCCL_NET_GDR_LEVEL=0) every byte crosses host memory twice more", "typical"),
    Input("ib_latency_s", 2e-6, 1.5e-6, 5e-6, "s", "one-way latency of a small message on EDR verbs, NCCL's proxy included",
          "Mellanox ConnectX-4: ~0.6 us verbs latency; a switch hop and NCCL's proxy thread add 1-4 us (typical)",
          "typical"),
    Input("ipoib_gbit_s", 25.0, 12.0, 40.0, "Gbit/s",
          "NCCL's rate over IPoIB: TCP sockets on the IB fabric, one socket per channel (1-2 channels)",
          "NCCL 2.4.8 net_socket.cc: 1 socket x 1 thread per channel; one TCP stream on EDR in connected mode "
          "~20 Gb/s [10-30] (BytePS docs/best-practice.md: a single TCP connection cannot fill 25 Gb/s); the "
          "study's IPoIB runs: NCCL_IB_DISABLE=1, NCCL_SOCKET_IFNAME=ib0 (ddl-benchmarks/mgwfbp/horovod_mpi_cj.sh)",
          "estimate"),
    Input("eth_gbit_s", 9.4, 7.0, 9.4, "Gbit/s", "TCP payload rate of one 10 GbE port",
          "10GBASE line rate; TCP payload at MTU 1500 = 1460/1538 of it (9.4 Gb/s, what tuned iperf reaches); "
          "untuned hosts ~7 Gb/s", "doc"),
    Input("eth_latency_s", 5e-6, 3e-6, 10e-6, "s", "10 GbE wire and switch latency (without the TCP stack)",
          "two 1538-byte serialisations at 10 Gb/s = 2.5 us, a switch hop and the NICs' DMA ~1 us each (estimate)",
          "estimate"),
    Input("tcp_message_s", 20e-6, 20e-6, 34e-6, "s",
          "host CPU per TCP message (kernel stack: system calls, copies, wake-up)",
          "measured: `python scripts/reference/tcp_message_cost.py` (64-byte messages, TCP_NODELAY, loopback) on "
          "the development VM, 2026-11-23: 20.1 us one way with both cores busy, 30.7-33.5 us on a quiet "
          "machine (each message pays its wake-up)", "measured"),
    # --- Horovod 0.19 (the all-reduce methods) and MPI under it -----------------------------------------------
    Input("mpi_shm_level_s", 1.5e-6, 0.5e-6, 3e-6, "s", "one level of a small MPI collective inside a node (Open MPI vader)",
          "Open MPI shared-memory BTL: ~0.5-2 us small-message latency (OSU micro-benchmarks, typical)", "typical"),
    Input("mpi_verbs_level_s", 4e-6, 2e-6, 8e-6, "s",
          "one inter-node level of a small MPI collective over IB verbs (the IB and IPoIB runs: btl openib)",
          "ddl-benchmarks/mgwfbp/horovod_mpi_cj.sh: -mca btl openib,vader,self for rdma=1 and 2; OSU latency on "
          "EDR ~1-2 us per message, a tree level 2-8 us with software overhead (estimate)", "estimate"),
    Input("mpi_tcp_level_s", 40e-6, 25e-6, 60e-6, "s",
          "one inter-node level of a small MPI collective over TCP (the 10 GbE runs)",
          "kernel TCP one-way ~20-30 us (tcp_message_s and the wire) plus Open MPI's TCP BTL progress (estimate)",
          "estimate"),
    Input("hvd_coordinator_s", 20e-6, 10e-6, 50e-6, "s",
          "Horovod's background thread per negotiation round beyond its MPI calls (request lists, matching)",
          "horovod 0.19 controller.cc ComputeResponseList with the cache off: every round serialises, gathers and "
          "matches the ranks' requests on rank 0 (estimate from its C++ work per round)", "estimate"),
    Input("hvd_launch_s", 10e-6, 5e-6, 20e-6, "s", "Horovod issuing one collective (NCCLAllreduce::Execute, events)",
          "horovod 0.19 ops/nccl_operations.cc: event records, the NCCL call, the finalizer's hand-off (estimate)",
          "estimate"),
    Input("hvd_cycle_s", 5e-3, 5e-3, 5e-3, "s",
          "Horovod's cycle time under ByteScheduler (its default; the other methods set 0)",
          "horovod v0.19.0-v0.20.3 operations.cc SetCycleTimeMs(5); ddl-benchmarks/bytescheduler/horovod_mpi_cj.sh "
          "sets no HOROVOD_CYCLE_TIME; ddl-benchmarks/mgwfbp/imagenet_benchmark.py sets HOROVOD_CYCLE_TIME=0, "
          "HOROVOD_CACHE_CAPACITY=0, HOROVOD_FUSION_THRESHOLD=0 for the other three", "code"),
    Input("hvd_fusion_mb", 64.0, 64.0, 64.0, "MiB", "Horovod's fusion buffer under ByteScheduler (its default)",
          "horovod 0.19 operations.cc SetTensorFusionThresholdBytes(64 * 1024 * 1024)", "code"),
    Input("py_hook_s", 20e-6, 10e-6, 50e-6, "s",
          "Python per gradient hook on the training thread (the optimizer's allreduce_async_ or push_pull call)",
          "a PyTorch autograd hook calling into the framework's C++ queue: 10-50 us of Python (estimate)", "estimate"),
    Input("d2d_gbyte_s", 450.0, 300.0, 550.0, "GB/s", "device copy rate into a merged or fusion buffer (RTX 2080 Ti)",
          "RTX 2080 Ti GDDR6 616 GB/s peak; a copy reads and writes, ~70% achievable (estimate)", "estimate"),
    Input("copy_launch_s", 6e-6, 4e-6, 10e-6, "s", "launching one device copy", "cudaMemcpyAsync launch ~4-10 us (typical)",
          "typical"),
    # --- ByteScheduler on Horovod --------------------------------------------------------------------------
    Input("bs_partition_elems", 4e6, 4e6, 4e6, "elements", "ByteScheduler's partition size",
          "ddl-benchmarks/bytescheduler/horovod_mpi_cj.sh BYTESCHEDULER_PARTITION=4000000; bytescheduler "
          "docs/scheduling.md: 'its unit is number of parameters' (16 MB in fp32)", "code"),
    Input("bs_credit_elems", 16e6, 16e6, 16e6, "elements", "ByteScheduler's credit (in flight at most, overshooting)",
          "ddl-benchmarks/bytescheduler/horovod_mpi_cj.sh BYTESCHEDULER_CREDIT=16000000, BYTESCHEDULER_CREDIT_TUNING=0; "
          "bytescheduler common/bytecore.py _loop sends while credit > 0 and may overshoot it",
          "code"),
    Input("bs_partition_cpu_s", 60e-6, 30e-6, 150e-6, "s",
          "ByteScheduler's scheduler thread per partition (Python: the priority queue, the task, Horovod's call)",
          "bytescheduler common/bytecore.py and horovod_task.py run per partition in Python (estimate)", "estimate"),
    Input("bs_param_step_s", 40e-6, 20e-6, 100e-6, "s",
          "ByteScheduler's poller thread stepping one parameter's optimizer (Python, one after another)",
          "bytescheduler pytorch ScheduledOptimizer._poll: _sgd/_adam per parameter in Python once its partitions "
          "are done (estimate: a handful of small kernels and Python per step)", "estimate"),
    Input("py_switch_interval_s", 5e-3, 5e-3, 5e-3, "s",
          "CPython's GIL switch interval: how long a thread waiting for the GIL lets a thread that never gives "
          "it up run before forcing a switch",
          "CPython 3.2+ sys.getswitchinterval() default 0.005 (Python docs, sys.setswitchinterval); "
          "ByteScheduler's poller (bytescheduler/pytorch/horovod.py ScheduledOptimizer._poll) re-queues every "
          "in-flight handle after horovod.torch.mpi_ops.poll, a pybind11 call that keeps the GIL (horovod v0.19.0 "
          "torch/mpi_ops_v2.cc: m.def(\"horovod_torch_poll\", &PollHandle), no gil_scoped_release), so it "
          "gives the GIL up only when forced", "code"),
    # --- BytePS 0.2 ---------------------------------------------------------------------------------------
    Input("byteps_partition_bytes", 4096000.0, 4096000.0, 4096000.0, "B", "BytePS's partition size",
          "ddl-benchmarks/byteps/launch.sh BYTEPS_PARTITION_BYTES=4096000 (a multiple of 4 GPUs x 4 KiB pages)",
          "code"),
    Input("byteps_signal_s", 20e-6, 10e-6, 30e-6, "s",
          "BytePS's local coordination per partition per stage (a Unix-socket message between a node's processes)",
          "byteps/common/communicator.cc BytePSCommSocket; a Unix-socket round trip ~10-30 us (estimate)", "estimate"),
    Input("pinned_copy_gbyte_s", 12.0, 7.0, 13.1, "GB/s", "each GPU's pinned copy to or from host memory (PCIe 3.0 x16)",
          "CUDA bandwidthTest on an RTX 2080 Ti: 13.1 GB/s host to device pinned, 7.1-13.1 over runs "
          "(usadellab/Helixer issue 22); BytePS registers its host buffers (cudaHostRegister)", "typical"),
    Input("server_sum_gbyte_s", 20.0, 10.0, 40.0, "GB/s",
          "a server's summation rate (8 engine threads, 4 OpenMP threads per sum, memory-bound dst += src)",
          "byteps server.cc / cpu_reducer.cc; BYTEPS_SERVER_ENGINE_THREAD=8 (ddl-benchmarks/byteps/launch.sh); "
          "~3 bytes of DRAM traffic per summed byte on a 60-100 GB/s socket (estimate); " +
          "measured here by `python scripts/reference/server_loop.py` (2026-11-26, development VM, 2 cores, load 0.13, kernel TCP on loopback, a Python server and 2 pushing workers): dst += src on 4,096,000-byte float32 partitions at 29.4 GB/s on one thread, 52.6 on two (cache-resident: an "
          "upper figure for one sum)", "estimate"),
    Input("server_recv_s", 10e-6, 5e-6, 30e-6, "s", "a server handling one received push or pull, under its one lock",
          "byteps server.cc BytePSHandler holds handle_mu_ for every request (estimate of its C++ work); " +
          "measured here by `python scripts/reference/server_loop.py` (2026-11-26, development VM, 2 cores, load 0.13, kernel TCP on loopback, a Python server and 2 pushing workers): a round of 4-KB pushes and pulls (8 messages) takes 138 us, 17 us a message with both "
          "sides' kernel TCP, of which the C++ handler is a small part", "estimate"),
    Input("rdma_message_s", 3e-6, 2e-6, 5e-6, "s", "host CPU per message on ps-lite's RDMA van (the IB runs)",
          "ps-lite rdma_van.h: WRITE_WITH_IMM per message, no copy (estimate)", "estimate"),
    Input("ipoib_stream_gbit_s", 20.0, 10.0, 30.0, "Gbit/s", "one TCP stream over IPoIB (a worker-server connection of ZMQ)",
          "connected-mode IPoIB reaches ~20-30 Gb/s per stream, datagram mode 10-15 (typical); BytePS "
          "docs/best-practice.md: 'a single TCP connection usually cannot run up to 25Gbps'; " +
          "measured here by `python scripts/reference/server_loop.py` (2026-11-26, development VM, 2 cores, load 0.13, kernel TCP on loopback, a Python server and 2 pushing workers): 0.54 ns per byte through the server, 1.9 GB/s (15 Gb/s) with the copies on 2 shared cores", "typical"),
    # --- compute ----------------------------------------------------------------------------------------
    Input("compute_scale", 1.0, 0.97, 1.03, "x", "the single-GPU iteration time relative to the study's throughput",
          "the study's single-GPU throughputs (253.1, 212.8, 49 samples/s) are averages over 5 launches; a GPU "
          "training loop varies 1-3% run to run (estimate)", "estimate"),
])
"""The study cluster's inputs."""
