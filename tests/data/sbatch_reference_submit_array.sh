#!/bin/bash
# ddlbench-paper: a ddlbench sweep on up to 2 nodes x 4 workers, one job step per cell. Written by harness/launchers/sbatch/script.py.
#SBATCH --job-name=ddlbench-paper             # name in squeue; %x in --output
#SBATCH --nodes=2                             # nodes in the allocation
#SBATCH --ntasks-per-node=4                   # workers per node (one per GPU, or per core on CPU)
#SBATCH --cpus-per-task=8                     # cores per worker (data loading, communication threads)
#SBATCH --gpus-per-node=4                     # GPUs per node
#SBATCH --partition=gpu                       # partition (queue) to run in
#SBATCH --time=95                             # wall-clock limit in minutes; then Slurm ends the job (TIMEOUT)
#SBATCH --output=/runs/r1/slurm-%x-%A_%a.out  # stdout and stderr; %x job name, %j job id, %a array index
#SBATCH --array=0-1                           # job array: one job per index; a %-suffix caps how many run at once
#SBATCH --exclusive                           # extra option from SbatchSpec.extra_sbatch

set -euo pipefail

SWEEPS=(/runs/r1/sweeps/paper-n1.yaml /runs/r1/sweeps/paper-n2.yaml)  # element i runs part i: the cells needing 1, 2 node(s); each element holds the largest allocation
OUTPUTS=(/runs/r1/r1-n1 /runs/r1/r1-n2)                               # where each part's tidy tables go (ddlbench slurm collect merges them)
SWEEP=${SWEEPS[$SLURM_ARRAY_TASK_ID]}
RESULTS=${OUTPUTS[$SLURM_ARRAY_TASK_ID]}

# The sweep runs here, on the first node. Each cell becomes one job step over the nodes it needs
# (harness/launchers/srun/launcher.py): a failed or hung cell is recorded and the sweep goes on; cells
# already on disk are skipped when the job is submitted again (--resume).
echo "job ${SLURM_JOB_ID}: nodes ${SLURM_JOB_NODELIST}"
ddlbench sweep "${SWEEP}" --output "${RESULTS}" --resume --launcher srun --no-progress
