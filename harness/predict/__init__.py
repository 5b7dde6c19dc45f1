"""Predicting scaling beyond the machine at hand (DESIGN section 6).

    ddlbench profile bert-base --batch 8 --iters 5 -o prof.parquet        # per-layer profile, this device
    ddlbench predict --profile prof.parquet --network ib-100g --nodes 1,2,4,8 --gpus-per-node 4
    ddlbench predict --workload resnet50 --device-preset study-gpu --network eth-10g --nodes 8
    ddlbench predict --profile prof.parquet --commbench RUN_DIR --validate SWEEP_RUN_DIR

Rooms:
  profiler          measure (hooks, clock) and count (FLOPs, bytes on a meta copy) a per-layer profile
  compute           profile -> per-layer times; device presets; calibration to one measured throughput
  network           links and cited presets, all-reduce cost on nodes x workers, commbench alpha/beta fit
  des               the event kernel (event queue, generator processes, FIFO resources)
  methods           each method's schedule as a simulation (BSP/WFBP/MG-WFBP/DDP/Horovod, PS resources)
  bytescheduler_sim ByteScheduler's scheduler loop and the next forward's per-layer waits
  predictor         grid -> rows shaped like the summary table (source=predicted)
  validate          predicted vs measured per cell (APE) and the median APE
  report, study     tables and grouped bars; the study's 32-GPU prediction (reports/study-prediction)
  loopback, loopback_probe   validation on this box; a tiny gloo all-reduce / ping-pong probe
"""
