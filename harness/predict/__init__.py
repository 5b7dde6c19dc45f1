"""Predicting scaling beyond the machine at hand: the model only (docs/ARCHITECTURE.md, "Predictor").

    ddlbench profile bert-base --batch 8 --iters 5 -o prof.parquet        # per-layer profile, this device
    ddlbench predict --profile prof.parquet --link ib-100g --nodes 1,2,4,8 --gpus-per-node 4
    ddlbench predict --workload resnet50 --device-preset study-gpu --link eth-10g --nodes 8
    ddlbench predict --workload bert-large --device-preset study-gpu --cluster study-ib-100g --intervals 32
    ddlbench predict --profile prof.parquet --commbench RUN_DIR --validate SWEEP_RUN_DIR

Rooms (the simulations themselves are in harness/sim):
  profiler, flop_count, profile_table
                    measure (hooks, clock) and count (FLOPs, bytes on a meta copy) a per-layer profile
  compute           profile -> per-layer times; device presets; calibration to one measured throughput
  commbench_fit     alpha/beta and links fitted to a commbench table (token buckets, push-pull)
  predictor         grid -> rows shaped like the summary table (source=predicted), from the registered models,
                    each method on its network's software stack (harness/sim/costs.py)
  inputs            model inputs with value, range, unit and source; Latin-hypercube samples, corners
  clusters          named whole clusters (links, stacks, knobs, inputs): the door a wing registers through
  request           `ddlbench predict` (PredictSpec)
Figures, tables and the predicted-vs-measured join are in harness/report (prediction, validation); the study's
cluster and curve are its wing's (harness/study/); its report and the validations are experiments (experiments/).
"""
