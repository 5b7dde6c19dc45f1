#!/bin/bash
# ddl-deepspeed: 8 workers (2 nodes x 4), launched with deepspeed. Written by harness/launchers/sbatch/script.py.
#SBATCH --job-name=ddl-deepspeed  # name in squeue; %x in --output
#SBATCH --nodes=2                 # nodes in the allocation
#SBATCH --ntasks-per-node=4       # workers per node (one per GPU, or per core on CPU)
#SBATCH --cpus-per-task=8         # cores per worker (data loading, communication threads)
#SBATCH --gpus-per-node=4         # GPUs per node
#SBATCH --partition=gpu           # partition (queue) to run in
#SBATCH --time=60                 # wall-clock limit in minutes; then Slurm ends the job (TIMEOUT)
#SBATCH --output=slurm-%x-%j.out  # stdout and stderr; %x job name, %j job id, %a array index

set -euo pipefail
export NCCL_SOCKET_IFNAME=ib0
# Rendezvous on the first node of the allocation, at the address Slurm uses for it (NodeAddr):
# node names need not resolve. Exported, so every task agrees without asking the controller.
mapfile -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
MASTER_ADDR=$(scontrol show node "${HOSTS[0]}" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2 || true)
export MASTER_ADDR=${MASTER_ADDR:-${HOSTS[0]}}
export MASTER_PORT=29500
echo "job $SLURM_JOB_ID: ${#HOSTS[@]} nodes (${HOSTS[*]}), rendezvous $MASTER_ADDR:$MASTER_PORT"

# One task per worker with the torch variables deepspeed.init_distributed reads.
export DDLBENCH_LAUNCHER=slurm
srun --kill-on-bad-exit=1 --cpus-per-task=8 bash -c '
  export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS
  export LOCAL_RANK=$SLURM_LOCALID LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE
  export NODE_RANK=$SLURM_NODEID
  exec "$@"' ddlbench-task ddlbench run --workload resnet50 --method wfbp-a2a --note 'two words' --backend deepspeed
