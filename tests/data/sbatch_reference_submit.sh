#!/bin/bash
# ddlbench-paper-n2: a ddlbench sweep on up to 2 nodes x 4 workers, one job step per cell. Written by harness/launchers/sbatch/script.py.
#SBATCH --job-name=ddlbench-paper-n2       # name in squeue; %x in --output
#SBATCH --nodes=2                          # nodes in the allocation
#SBATCH --ntasks-per-node=4                # workers per node (one per GPU, or per core on CPU)
#SBATCH --cpus-per-task=8                  # cores per worker (data loading, communication threads)
#SBATCH --gpus-per-node=4                  # GPUs per node
#SBATCH --partition=gpu                    # partition (queue) to run in
#SBATCH --time=35                          # wall-clock limit in minutes; then Slurm ends the job (TIMEOUT)
#SBATCH --output=/runs/r1/slurm-%x-%j.out  # stdout and stderr; %x job name, %j job id, %a array index
#SBATCH --exclusive                        # extra option from SbatchSpec.extra_sbatch

set -euo pipefail

SWEEP=/runs/r1/sweeps/paper-n2.yaml  # the cells needing 2 node(s): workers 8
RESULTS=/runs/r1/r1-n2               # tidy tables of this part (ddlbench slurm collect merges the parts)

# The sweep runs here, on the first node. Each cell becomes one job step over the nodes it needs
# (harness/launchers/srun/launcher.py): a failed or hung cell is recorded and the sweep goes on; cells
# already on disk are skipped when the job is submitted again (--resume).
echo "job ${SLURM_JOB_ID}: nodes ${SLURM_JOB_NODELIST}"
ddlbench sweep "${SWEEP}" --output "${RESULTS}" --resume --launcher srun --no-progress
