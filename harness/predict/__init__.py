"""Predicting scaling beyond the machine at hand: the model only (docs/ARCHITECTURE.md, "Predictor").

    ddlbench profile bert-base --batch 8 --iters 5 -o prof.parquet        # per-layer profile, this device
    ddlbench predict --profile prof.parquet --network ib-100g --nodes 1,2,4,8 --gpus-per-node 4
    ddlbench predict --workload resnet50 --device-preset study-gpu --network eth-10g --nodes 8
    ddlbench predict --profile prof.parquet --commbench RUN_DIR --validate SWEEP_RUN_DIR

Rooms:
  profiler, layer_hooks, flop_count, profile_table
                    measure (hooks, clock) and count (FLOPs, bytes on a meta copy) a per-layer profile
  compute           profile -> per-layer times; device presets; calibration to one measured throughput
  network           links and cited presets, all-reduce cost on nodes x workers (pure)
  commbench_fit     alpha/beta and links fitted to a commbench table (token buckets, push-pull)
  des               the event kernel (event queue, generator processes, FIFO resources)
  model             the contract a scheme registers beside itself: Model(simulate), NoModel(reason), Outcome
  bucketed_sim      BSP/WFBP/MG-WFBP (all-reduce and PS) and DDP schedules
  horovod_sim       Horovod's fusion cycle
  bytescheduler_sim ByteScheduler's scheduler loop and the next forward's per-layer waits
  ps_sim            parameter-server NICs and summing servers; the PS link from push-pull times
  predictor         grid -> rows shaped like the summary table (source=predicted), from the registered models
  study_cluster     the study's testbed as presets (links, host path, each method's knobs), each with its source
Figures, tables and the predicted-vs-measured join are in harness/report (prediction, validation); the
study and validation scripts in scripts/ (study_prediction, loopback_validation, testbed_validation,
loopback_probe).
"""
