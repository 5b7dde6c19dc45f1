"""Column contracts of the tidy tables (docs/ARCHITECTURE.md, "Tidy tables"). Units are in the column names.

A run directory `results/<run-id>/` holds:
    raw.parquet          one row per (run, cell, rank, iteration)
    summary.parquet      one row per cell (every axis value and knob, statistics, scaling, breakdown)
    environment.parquet  one row per run (versions, devices, hosts, git commit, command line, fingerprint)
    commbench.parquet    (optional) one row per (collective, message size): time, algbw, busbw, fit
    cells/<cell-id>/     per-cell parts (the truth the tables are rebuilt from) and rank logs
Every table carries `schema_version`.
"""

SCHEMA_VERSION = 1

RAW_COLUMNS = [
    "schema_version",
    "run_id",
    "cell_id",
    "rank",
    "iteration",
    "iter_s",  # wall time of this iteration on this rank (start of one to start of the next)
    "forward_s",  # forward, minus the waits a scheme performs inside it (forward_wait_s)
    "forward_wait_s",  # blocked in forward waiting for communication (ByteScheduler's pre-hooks); NaN: older run
    "backward_s",
    "comm_wait_s",  # time blocked waiting for communication after backward (exposed on this rank)
    "optimizer_s",
    "host_issue_s",  # host time from the iteration's start until its optimizer step was issued (NaN: older run)
    "device_lag_s",  # how long after the host issued the iteration's start the device reached it (CUDA; CPU ~0)
]

# Axis and identity columns of a summary row (knobs are added as `knob_<name>` columns, and in full as
# JSON in `knobs_json`).
SUMMARY_AXES = [
    "schema_version",
    "run_id",
    "cell_id",
    "source",  # source: measured | predicted
    "status",
    "reason",
    "log_tail",  # status: ok | failed
    "workload",
    "sample_unit",
    "scheme",
    "backend",
    "workers",
    "nodes",
    "workers_per_node",
    "servers",
    "server_hosts",  # where the servers ran: dedicated | colocated ("" without servers; auto if it failed first)
    "batch_per_worker",
    "global_batch",
    "seq_len",
    "dtype",
    "device",
    "network",
    "network_rate_mbit",
    "warmup",
    "iters",
    "knobs_json",
]

SUMMARY_STATS = [
    # iteration time (slowest rank of each iteration), seconds
    "iter_s_median",
    "iter_s_q1",
    "iter_s_q3",
    "iter_s_iqr",
    "iter_s_mean",
    "iter_s_std",
    "iter_s_ci95_low",
    "iter_s_ci95_high",  # 95% CI of the mean: mean -/+ t_{0.975,n-1} s/sqrt(n)
    "iter_s_cv",  # coefficient of variation: std / mean
    "samples",  # measured iterations behind the statistics
    # the stop rule (harness/measure/stoprule.py; README, "Measuring")
    "precision_target",  # --precision: the median's 95% CI asked within +-this fraction; NaN: a fixed cell
    "precision_reached",  # the half-width of the median's 95% CI (order statistics) over the median; NaN: fixed
    "stop_reason",  # reached | max-iters | max-time | fixed (no --precision: exactly `iters`); "": older run
    # throughput X = global_batch / t_iter, per iteration, then summarised
    "throughput_median",
    "throughput_mean",
    "throughput_ci95_low",
    "throughput_ci95_high",
    "throughput_iqr",
    # scaling against the measured 1-worker, no-communication baseline of the same sweep
    "baseline_throughput",
    "speedup",
    "scaling_efficiency",
    # breakdown (medians over iterations of the slowest rank's phases), seconds
    "forward_s",
    "forward_wait_s",
    "backward_s",
    "comm_wait_s",
    "optimizer_s",
    "compute_only_iter_s",  # the 1-worker baseline's median iteration
    "exposed_comm_s",  # iter_s_median - compute_only_iter_s (never below 0)
    "comm_only_s",  # time to synchronise all gradients once, nothing overlapped (probe)
    "overlap_ratio",  # 1 - exposed_comm_s / comm_only_s, clipped to [0, 1]
    "straggler_rank",
    "rank_iter_s_min",
    "rank_iter_s_max",
    # workload facts
    "params",
    "grad_bytes",
    "flops_per_sample",
    "comm_bytes_per_iter",
    "intensity_flops_per_byte",
    "wall_s",
    "startup_s",  # launcher placing the ranks -> rank 0's first warm-up iteration; NaN: not recorded
    "rank_start",  # warm (forked from the pre-imported zygote) | cold (a fresh interpreter); "": not recorded
    "host_heap",  # kept (a CPU rank's large tensors reused, not mapped anew each iteration:
    # harness/measure/host_heap.py) | default (the allocator as it started) | "": not recorded
    "gpu_models",  # every rank's GPU, e.g. "2 x NVIDIA A100-SXM4-80GB" ("" on CPU)
    "host_issue_s",  # median host issue time per iteration (slowest rank's iterations)
    "device_lag_s",  # median lag of the device behind the host at each iteration's start (CUDA)
    "host_bound",  # True: the device stayed less than half an iteration behind the host
    # (harness/results/summarize.py, HOST_BOUND_LAG), so the host's pace (Python,
    # kernel launches) sets the cell's, not the GPU or the network; None on CPU
    "mfu",  # model FLOPs utilisation of one device (fraction); None: device/dtype not in
    # harness/results/peaks.py, or CPU
    "device_peak_tflops",  # the dense peak MFU was taken against
    "dist_backend",  # what moved the workers' tensors (dist.get_backend): gloo, nccl, horovod-nccl...
    "plan_json",  # the scheme's plan (buckets, groups, partitions, alpha/beta...), JSON
    # the network the traffic took (harness/results/netcheck.py)
    "iface",  # interface the ranks named (a profile's, or their route to the rendezvous)
    "net_main_iface",  # interface that carried most bytes (loopback left out across nodes)
    "net_iface_share",  # share of the cell's bytes that went through `iface`
    "net_bytes_per_iter",  # bytes (sent + received, all nodes) through `iface` per iteration
    "net_bytes_json",  # rank@host (one per node) -> interface -> [rx, tx] bytes per iteration, JSON
    "net_check",  # ok | wrong-interface | not checked (one box)
    # the emulated hosts' processors (the testbed's CPU group per host, harness/testbed/cgroups.py); NaN: no share
    "host_cpus",  # CPU share of every host, in cores (CFS quota / period)
    "host_cores",  # cores of its own per host (cpuset)
    "throttled_periods",  # CFS periods in which a host of the cell ran out of its share, summed over its hosts
    "throttled_s",  # time its hosts' groups spent throttled during the cell, summed over its hosts, seconds
    "throttled_json",  # host namespace -> [periods, seconds] throttled during the cell, JSON ("" without a share)
]

SUMMARY_COLUMNS = SUMMARY_AXES + SUMMARY_STATS

ENV_COLUMNS = [
    "schema_version",
    "run_id",
    "fingerprint",
    "created_utc",
    "command",
    "git_commit",
    "python",
    "torch",
    "transformers",
    "cuda",
    "nccl",
    "libraries",  # the backend library columns that follow, comma-separated: one per backend that names a
    # library (BackendEntry.library), named after the backend, its installed version or ""
    "device",
    "device_name",
    "device_count",
    "cpu_model",
    "cpu_count",
    "hosts",
    "interfaces",
    "slurm_job_id",
    "slurm_nodelist",
]

COMMBENCH_COLUMNS = [
    "schema_version",
    "run_id",
    "collective",
    "backend",
    "workers",
    "size_bytes",
    "rep",
    "time_s",  # slowest rank's time of this repetition
    "algbw_gbit_s",  # size / time
    "busbw_gbit_s",  # algbw * 2(n-1)/n for all-reduce (nccl-tests' convention); = algbw for push-pull
    "network",
    "dist_backend",  # what moved the tensors (dist.get_backend of the workers' group): gloo, nccl, ...
    "fit_alpha_s",
    "fit_beta_s_per_byte",  # least-squares t = alpha + beta*size over per-size medians
]
