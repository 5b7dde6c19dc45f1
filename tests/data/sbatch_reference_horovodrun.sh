#!/bin/bash
# ddl-horovod: 8 workers (2 nodes x 4), launched with horovodrun. Written by harness/launchers/sbatch/script.py.
#SBATCH --job-name=ddl-horovod    # name in squeue; %x in --output
#SBATCH --nodes=2                 # nodes in the allocation
#SBATCH --ntasks-per-node=4       # workers per node (one per GPU, or per core on CPU)
#SBATCH --cpus-per-task=8         # cores per worker (data loading, communication threads)
#SBATCH --gpus-per-node=4         # GPUs per node
#SBATCH --time=60                 # wall-clock limit in minutes; then Slurm ends the job (TIMEOUT)
#SBATCH --output=slurm-%x-%j.out  # stdout and stderr; %x job name, %j job id, %a array index

set -euo pipefail
# Rendezvous on the first node of the allocation, at the address Slurm uses for it (NodeAddr):
# node names need not resolve. Exported, so every task agrees without asking the controller.
mapfile -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
MASTER_ADDR=$(scontrol show node "${HOSTS[0]}" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2 || true)
export MASTER_ADDR=${MASTER_ADDR:-${HOSTS[0]}}
export MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 12000))}  # = harness.contracts.rendezvous.port_for_job
echo "job $SLURM_JOB_ID: ${#HOSTS[@]} nodes (${HOSTS[*]}), rendezvous $MASTER_ADDR:$MASTER_PORT"

# horovodrun is the job's launcher: one copy on the first node drives all 8 workers;
# workers on other nodes are started over ssh (passwordless ssh between nodes is needed).
HOROVOD_HOSTS=$(printf '%s:4,' "${HOSTS[@]}")
# Its step gets the node's cores for all local workers (steps do not inherit sbatch's).
srun --kill-on-bad-exit=1 --nodes=1 --ntasks=1 --cpus-per-task=32 --nodelist="${HOSTS[0]}" \
  horovodrun --gloo -np 8 -H "${HOROVOD_HOSTS%,}" \
  ddlbench run --workload resnet50 --method wfbp-a2a --note 'two words' --backend horovod
