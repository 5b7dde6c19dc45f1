#!/bin/bash
# ddl-srun: 2 workers (2 nodes x 1), launched with srun. Written by harness/launchers/sbatch/script.py.
#SBATCH --job-name=ddl-srun         # name in squeue; %x in --output
#SBATCH --nodes=2                   # nodes in the allocation
#SBATCH --ntasks-per-node=1         # workers per node (one per GPU, or per core on CPU)
#SBATCH --cpus-per-task=2           # cores per worker (data loading, communication threads)
#SBATCH --partition=cpu             # partition (queue) to run in
#SBATCH --time=30                   # wall-clock limit in minutes; then Slurm ends the job (TIMEOUT)
#SBATCH --output=logs/%x-%A_%a.out  # stdout and stderr; %x job name, %j job id, %a array index
#SBATCH --array=0-3%2               # job array: one job per index; a %-suffix caps how many run at once
#SBATCH --exclusive                 # extra option from SbatchSpec.extra_sbatch

set -euo pipefail
export GLOO_SOCKET_IFNAME=eth0
export OMP_NUM_THREADS=1
# Rendezvous on the first node of the allocation, at the address Slurm uses for it (NodeAddr):
# node names need not resolve. Exported, so every task agrees without asking the controller.
mapfile -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
MASTER_ADDR=$(scontrol show node "${HOSTS[0]}" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2 || true)
export MASTER_ADDR=${MASTER_ADDR:-${HOSTS[0]}}
export MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 12000))}  # = harness.contracts.rendezvous.port_for_job
echo "job $SLURM_JOB_ID: ${#HOSTS[@]} nodes (${HOSTS[*]}), rendezvous $MASTER_ADDR:$MASTER_PORT"

# One task per worker; each reads its rank from SLURM_* (harness.launchers.srun.env).
# --kill-on-bad-exit: one failed rank ends the step instead of leaving the others hung.
srun --kill-on-bad-exit=1 --cpus-per-task=2 ddlbench run --workload resnet50 --method wfbp-a2a --note 'two words'
