"""Every input of the study's cluster (harness/study/cluster.py), with its value, range and source
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

IPOIB_STREAM = ("NCCL 2.4.8 src/transport/net.cc netGetRings builds one ring per NIC (one channel across nodes with one "
                "ib0 per node) and src/transport/net_socket.cc opens 1 thread x 1 socket per connection unless the NIC is "
                "AWS's: one TCP stream per ring edge and direction; the study's IPoIB runs set NCCL_IB_DISABLE=1, "
                "NCCL_SOCKET_IFNAME=ib0 (ddl-benchmarks/mgwfbp/horovod_mpi_cj.sh, rdma=2). One TCP stream over IPoIB: "
                "connected mode (MTU 65520, no segmentation offload) about 20-25 Gb/s at best, datagram mode (MTU "
                "2044-4092) about 8-12 Gb/s (Linux Documentation/infiniband/ipoib.rst on the two modes; BytePS "
                "docs/best-practice.md: 'a single TCP connection usually cannot run up to 25Gbps'); the study does "
                "not say which mode (typical)")
GIL = {  # python scripts/reference/gil_handoff.py, 2026-11-26 22:53, development VM (2 cores, nothing else running),
    # CPython 3.11.7: reports/study-prediction/gil-handoff.json
    "forced_extra": (0.2e-3, 0.15e-3, 1.0e-3),    # beyond the interval: 5.205 ms at 5 ms (0.19-0.21 ms at 0.5-10 ms)
    "handoff": (0.08e-3, 0.07e-3, 0.3e-3),        # 0.073-0.103 ms with 1 spinner, 0.12-0.17 ms with 2
    "scan": (0.13e-6, 0.13e-6, 0.5e-6),            # 0.13 us a step on 3.11
    "fwd_calls": (3.0, 2.6, 3.7),                  # 2.64 (ResNet-50), 3.68 (BERT-Base), 3.71 (BERT-Large) per layer
    "hook_acquires": (3.0, 1.0, 6.0),              # switch intervals per hooked layer in a convoy trial: 1.9-6.0
    "convoy": (0.6, 0.05, 1.0),                    # trials the spinner won: 55% (25 us layers), 70% (75 us layers)
    "task_py_s": 5.7e-6, "done_py_s": 2.5e-6, "torch_op_s": 0.76e-6,
}
"""The GIL microbenchmark's figures (value, low, high) that inputs below take."""
GIL_SOURCE = ("measured by `python scripts/reference/gil_handoff.py` (2026-11-26, development VM, 2 cores, nothing else "
              "running, CPython 3.11.7; reports/study-prediction/gil-handoff.json)")
ZMQ_VAN = (5.6, 2.5, 8.0)
"""GB/s through one ZeroMQ I/O thread, both directions at once (value, low, high)."""
ZMQ_VAN_SOURCE = ("Measured by `python scripts/reference/zmq_van.py` (2026-11-26, development VM, 2 cores, nothing else "
                  "running; reports/study-prediction/zmq-van.json): one I/O thread moves 5.4-5.8 GB/s with 4,096,000-byte "
                  "partitions going both ways (2.8 each way) and 4.8 GB/s one way, over loopback; the range allows "
                  "the study's 2019 Xeons and a real NIC's interrupts (low) and a faster core (high)")
OVERLAP_SOURCE = ("GeForce cards have no peer-to-peer: NCCL 2.4's shared-memory transport moves each ring step with its own "
                  "kernel through host memory over PCIe and BytePS's copies cross the same PCIe path, beside backward's "
                  "kernels on the same GPU. Public measurements of the contention: a GEMM beside an NCCL all-gather kernel "
                  "ran nearly 2x slower on an H100 (NVIDIA developer forums, 'Compute-Communication Overlap Causes Severe "
                  "GEMM Performance Degradation because of Tail Effect', 2025: the upper end); FiCCO (arXiv 2512.10236) "
                  "and T3 (arXiv 2401.16677) name contention for SMs and memory as the main limit of overlap; Huawei's "
                  "MindStudio tuning guide: communication 1-2x slower beside memory-bound operators. NCCL 2.4 runs one "
                  "block per channel (1-2 of the 2080 Ti's 68 SMs), so compute loses little (typical)")

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
    Input("ipoib_gbit_s", 16.0, 8.0, 25.0, "Gbit/s",
          "NCCL's rate between two nodes over IPoIB: one TCP stream per ring edge and direction",
          IPOIB_STREAM, "typical"),
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
    Input("mpi_verbs_message_s", 1.5e-6, 0.8e-6, 4e-6, "s",
          "the root's CPU per small message it receives over IB verbs (Open MPI btl openib), one after another",
          "Open MPI 4.0 coll/basic gatherv: the root posts a receive per rank and completes each; OSU micro-benchmark "
          "message rates on EDR (a few million small messages per second per core, i.e. 0.3-1 us, plus the "
          "matching and copy of a request list, typical)", "typical"),
    Input("mpi_tcp_message_s", 20e-6, 10e-6, 34e-6, "s",
          "the root's CPU per small message it receives over TCP (Open MPI btl tcp, the 10 GbE runs)",
          "kernel TCP receive per message: measured `python scripts/reference/tcp_message_cost.py` 20-34 us one "
          "way on the development VM (tcp_message_s); Open MPI's TCP BTL progress on top (typical)", "typical"),
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
    Input("bs_param_step_s", 15e-6, 5e-6, 40e-6, "s",
          "ByteScheduler's poller stepping one parameter, Python beyond the optimizer's torch ops and its name search "
          "(the param_groups loop, the state dict, the bias corrections)",
          "bytescheduler pytorch/horovod.py ScheduledOptimizer._sgd/_adam, run per parameter in the poller thread "
          "(estimate: a few dozen bytecodes and dict lookups on CPython 3.6)", "estimate"),
    Input("bs_fwd_gap_s", 0.0, 0.0, 0.0, "s", "ByteScheduler's plugin: host time between two forward layers, each "
          "launched once the device has finished the one before (its pre-forward hook takes a lock from Python)",
          "no figure from code: 0 is torch's own (launches run ahead of the GPU); a value comes only from a one-node "
          "calibration (harness/study/calibration.py)", "estimate"),
    Input("py_switch_interval_s", 5e-3, 5e-3, 5e-3, "s",
          "CPython's GIL switch interval: how long a thread waiting for the GIL lets a thread that never gives "
          "it up run before forcing a switch",
          "CPython 3.2+ sys.getswitchinterval() default 0.005 (Python docs, sys.setswitchinterval); "
          "ByteScheduler's poller (bytescheduler/pytorch/horovod.py ScheduledOptimizer._poll) re-queues every "
          "in-flight handle after horovod.torch.mpi_ops.poll, a pybind11 call that keeps the GIL (horovod v0.19.0 "
          "torch/mpi_ops_v2.cc: m.def(\"horovod_torch_poll\", &PollHandle), no gil_scoped_release), so it "
          "gives the GIL up only when forced, when its queue empties or at a torch op", "code"),
    Input("gil_forced_extra_s", GIL["forced_extra"][0], GIL["forced_extra"][1], GIL["forced_extra"][2], "s",
          "a forced GIL switch beyond the switch interval: the waiter's timed wait, the drop request, the holder "
          "reaching its next check, the hand-over",
          GIL_SOURCE + ": a thread waiting for the GIL against a spinner whose poll keeps it waits the switch "
          "interval and this much more (median at 5 ms; the range: 1 and 2 spinners, 0.5-10 ms intervals, CPython "
          "3.6's slower eval loop)", "measured"),
    Input("gil_handoff_s", GIL["handoff"][0], GIL["handoff"][1], GIL["handoff"][2], "s",
          "the wait for the GIL from a Python thread that gives it up at once (rank 0's poller polling ready "
          "events through ctypes; any poller at a torch op)",
          GIL_SOURCE + ": the median wait against a spinner whose poll releases the GIL (ctypes CDLL), at 1 and "
          "5 ms intervals", "measured"),
    Input("bs_task_py_s", 30e-6, 15e-6, 60e-6, "s",
          "ByteScheduler's gradient hook per partition: its ByteTask (two locks, a condition, the description "
          "string), the tensor slice, Horovod's allreduce_async_ (handle, ready event, enqueue) and the queue put",
          GIL_SOURCE + f": the plugin's Python part alone takes {GIL['task_py_s'] * 1e6:.1f} us on CPython 3.11 "
          "here; CPython 3.6 runs such code 1.5-2x slower, and horovod v0.19 torch/mpi_ops.py allreduce_async_ adds "
          "its Python and DoAllreduce's C++ (a handle under a mutex, a CUDA event, the tensor queue): 10-40 us "
          "(estimate)", "estimate"),
    Input("bs_done_py_s", 25e-6, 10e-6, 60e-6, "s",
          "ByteScheduler's poller finishing one handle: synchronize, the task's callbacks (partition_done under a "
          "lock, the core's credit under its condition, the eager .format of debug text), grad.set_",
          GIL_SOURCE + f": get, poll, a callback under a lock and grad.set_ take {GIL['done_py_s'] * 1e6:.1f} us on "
          "CPython 3.11 here; bytescheduler common/bytetask.py notify_finish and common/bytecore.py _end_callback "
          "add a few dozen more lines per handle (estimate)", "estimate"),
    Input("bs_scan_step_s", GIL["scan"][0], GIL["scan"][1], GIL["scan"][2], "s",
          "one step of ByteScheduler's optimizer search: `for gp in group['params']: if self._parameter_names[p] "
          "!= self._parameter_names[gp] ...` (two tensor-keyed dict lookups, a string compare)",
          GIL_SOURCE + ": measured per step over a 400-parameter list on CPython 3.11 (bytescheduler "
          "pytorch/horovod.py _sgd/_adam); the high end allows CPython 3.6's slower dict and compare", "measured"),
    Input("fwd_gil_per_layer", GIL["fwd_calls"][0], GIL["fwd_calls"][1], GIL["fwd_calls"][2], "calls",
          "torch calls the training thread makes per forward layer, each giving the GIL up and taking it back",
          GIL_SOURCE + ": torch calls in one forward and loss of ResNet-50, BERT-Base and BERT-Large per layer with "
          "parameters (a TorchFunctionMode count)", "measured"),
    Input("gil_acquires_per_hook", GIL["hook_acquires"][0], GIL["hook_acquires"][1], GIL["hook_acquires"][2], "waits",
          "GIL waits per hooked layer of torch's autograd engine when the spinning poller wins every race for it",
          GIL_SOURCE + ": a backward through torch's autograd engine (CPU, 40 layers, hooks on the AccumulateGrad "
          "nodes as the plugin registers them) beside a spinner that keeps the GIL: in a trial where the spinner "
          "wins the races, each hooked layer waits this many switch intervals", "measured"),
    Input("gil_convoy_share", GIL["convoy"][0], GIL["convoy"][1], GIL["convoy"][2], "x",
          "the share of GIL hand-offs the spinning poller wins: a thread that gives the GIL up for tens of "
          "microseconds of C work (kernel launches) finds it taken when it comes back if the poller woke first",
          GIL_SOURCE + ": the same backward either waits at nearly every hooked layer or almost never, trial by "
          "trial (the race between the poller's wake-up and the autograd thread's next need for the GIL): the "
          "spinner won 55% of 20 trials with 25 us layers and 70% with 75 us layers (a PyTorch 1.4 backward node "
          "on a GPU: 20-100 us of launches); the study's bare-metal hosts wake threads faster than this VM, and a "
          "deep C-state slower: the range is the whole span", "measured"),
    Input("py_op_s", 8e-6, 4e-6, 15e-6, "s",
          "one torch op called from Python on a GPU in 2019 (argument parsing, dispatch, the kernel launch): what "
          "an optimizer's Python loop pays per op",
          "pytorch/pytorch issue 41383 (2020): 5-7 us per elementwise op from Python on CPU; issue 82793: about "
          "4 us per op on CUDA (PyTorch 1.12, a faster dispatcher than 1.4's); a CUDA kernel launch 4-10 us "
          "(typical); measured here: " + f"{GIL['torch_op_s'] * 1e6:.2f} us per CPU op on torch 2.13 (a floor)",
          "typical"),
    Input("calib_adam_share", 1.0, 0.0, 1.0, "x",
          "which optimizer the study's single-GPU BERT throughputs ran: 1 = Adam-family (its Horovod scripts), 0 = "
          "SGD (its BytePS script); the single-GPU iteration is split into forward and backward and this optimizer",
          "ddl-benchmarks horovod/bert_benchmark.py and mgwfbp/bert_benchmark.py: transformers AdamW; "
          "bytescheduler/bert_benchmark.py: torch.optim.Adam; byteps/bert_benchmark.py: optim.SGD(lr=0.01); the "
          "paper does not say which script gave the single-GPU figure (estimate: the Horovod one, as for "
          "ResNet-50, where every script runs SGD)", "estimate"),
    Input("per_method_optimizer", 1.0, 1.0, 1.0, "switch",
          "1: each method steps the optimizer its framework's script ran (ResNet-50: SGD everywhere; BERT: AdamW "
          "on Horovod, Adam under ByteScheduler, SGD on BytePS); 0: every method steps the single-GPU run's "
          "(the counterfactual the report's mechanism table compares with)",
          "ddl-benchmarks mgwfbp/ and horovod/bert_benchmark.py (transformers AdamW), bytescheduler/bert_benchmark.py "
          "(optim.Adam), byteps/bert_benchmark.py (optim.SGD, lr=0.01), */imagenet_benchmark.py (optim.SGD)",
          "code"),
    # --- the GPU shared between communication and compute (GeForce, no peer-to-peer) -----------------------
    Input("overlap_compute_slowdown", 0.05, 0.01, 0.25, "x",
          "how much slower backward runs while a collective or a copy runs beside it on the same GPU",
          OVERLAP_SOURCE, "typical"),
    Input("overlap_comm_slowdown", 0.2, 0.0, 0.6, "x",
          "how much slower a collective or copy runs while compute runs beside it on the same GPU",
          OVERLAP_SOURCE, "typical"),
    # --- BytePS 0.2 ---------------------------------------------------------------------------------------
    Input("byteps_partition_bytes", 4096000.0, 4096000.0, 4096000.0, "B", "BytePS's partition size",
          "ddl-benchmarks/byteps/launch.sh BYTEPS_PARTITION_BYTES=4096000 (a multiple of 4 GPUs x 4 KiB pages)",
          "code"),
    Input("byteps_nccl_edge_gbyte_s", 5.0, 3.9, 7.3, "GB/s",
          "one ring edge of BytePS's in-node NCCL reduce-scatter and all-gather of a partition (through host memory)",
          "byteps/common/core_loops.cc (v0.2): per partition an ncclReduceScatter and an ncclAllGather on BytePS's "
          "own stream and communicator, grouped (ncclGroupStart/End), 4,096,000-byte partitions; the same PCIe "
          "path and the same sourced range as shm_edge_gbyte_s: " + NCCL_PCIE, "typical"),
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
    Input("ipoib_stream_gbit_s", 16.0, 8.0, 25.0, "Gbit/s", "one TCP stream over IPoIB (a worker-server connection of ZMQ)",
          IPOIB_STREAM + "; " + "measured here by `python scripts/reference/server_loop.py` (2026-11-26, development VM, 2 cores, load 0.13, kernel TCP on loopback, a Python server and 2 pushing workers): 0.54 ns per byte through the server, 1.9 GB/s (15 Gb/s) with the copies on 2 shared cores", "typical"),
    Input("ipoib_nic_gbit_s", 40.0, 25.0, 60.0, "Gbit/s",
          "what one node's IPoIB interface carries for BytePS, all its worker-server TCP connections at once, per "
          "direction",
          "a worker root holds one ZMQ connection per server (8 at 32 GPUs) and a server one per worker node; TCP "
          "streams over IPoIB are limited each by one core's kernel stack (ipoib_stream_gbit_s), several in "
          "parallel by the interface's interrupt handling and the EDR link: 25-60 Gb/s in aggregate on connected "
          "mode (typical; BytePS docs/best-practice.md raises the number of connections for the same reason)",
          "typical"),
    Input("zmq_van_gbyte_s", ZMQ_VAN[0], ZMQ_VAN[1], ZMQ_VAN[2], "GB/s",
          "ps-lite's ZeroMQ van without RDMA: what one process's single ZeroMQ I/O thread moves, sends and receives "
          "together (a worker's pushes and pulls, a server's pushes in and pulls out)",
          "ps-lite ZMQVan (BytePS 0.2's 3rdparty/ps-lite, src/zmq_van.h): zmq_ctx_new() with ZeroMQ's default of one "
          "I/O thread, ROUTER receiver and DEALER senders, data frames zero-copy; the IPoIB and 10 GbE runs set "
          "DMLC_ENABLE_RDMA=0 (ddl-benchmarks/byteps/launch.sh). " + ZMQ_VAN_SOURCE, "measured"),
    # --- compute ----------------------------------------------------------------------------------------
    Input("compute_scale", 1.0, 0.97, 1.03, "x", "the single-GPU iteration time relative to the study's throughput",
          "the study's single-GPU throughputs (253.1, 212.8, 49 samples/s) are averages over 5 launches; a GPU "
          "training loop varies 1-3% run to run (estimate)", "estimate"),
])
"""The study cluster's inputs."""
