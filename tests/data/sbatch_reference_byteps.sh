#!/bin/bash
# ddl-byteps: 8 workers (2 nodes x 4), launched with byteps. Written by harness/launchers/sbatch/script.py.
#SBATCH --job-name=ddl-byteps     # name in squeue; %x in --output
#SBATCH --nodes=3                 # 2 worker node(s) + 1 parameter-server node(s)
#SBATCH --ntasks-per-node=4       # workers per node (one per GPU, or per core on CPU)
#SBATCH --cpus-per-task=8         # cores per worker (data loading, communication threads)
#SBATCH --gpus-per-node=4         # GPUs per node
#SBATCH --time=60                 # wall-clock limit in minutes; then Slurm ends the job (TIMEOUT)
#SBATCH --output=slurm-%x-%j.out  # stdout and stderr; %x job name, %j job id, %a array index
#SBATCH --constraint=ib           # extra option from SbatchSpec.extra_sbatch

set -euo pipefail
# Rendezvous on the first node of the allocation, at the address Slurm uses for it (NodeAddr):
# node names need not resolve. Exported, so every task agrees without asking the controller.
mapfile -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
MASTER_ADDR=$(scontrol show node "${HOSTS[0]}" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2 || true)
export MASTER_ADDR=${MASTER_ADDR:-${HOSTS[0]}}
export MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 12000))}  # = harness.contracts.rendezvous.port_for_job
echo "job $SLURM_JOB_ID: ${#HOSTS[@]} nodes (${HOSTS[*]}), rendezvous $MASTER_ADDR:$MASTER_PORT"

# BytePS roles (DMLC_*): one scheduler, the servers, and the workers, as three concurrent steps.
# DMLC_NUM_WORKER counts worker nodes; BYTEPS_LOCAL_RANK/SIZE place a worker within its node.
export DMLC_NUM_WORKER=2 DMLC_NUM_SERVER=2
# The scheduler listens next to MASTER_PORT, which stays free for torch.distributed.
export DMLC_PS_ROOT_URI=$MASTER_ADDR DMLC_PS_ROOT_PORT=$((MASTER_PORT + 1))
WORKER_NODES=$(IFS=,; echo "${HOSTS[*]:0:2}")
SERVER_NODES=$(IFS=,; echo "${HOSTS[*]:2:1}")  # on nodes of their own
# --overlap: the scheduler and servers share CPUs with the workers' step.
srun --overlap --nodes=1 --ntasks=1 --nodelist="${HOSTS[0]}" \
  env DMLC_ROLE=scheduler bpslaunch &
SCHEDULER=$!
srun --overlap --nodes=1 --ntasks=2 --nodelist="$SERVER_NODES" \
  env DMLC_ROLE=server bpslaunch &
SERVERS=$!
status=0
srun --kill-on-bad-exit=1 --nodes=2 --ntasks=8 --ntasks-per-node=4 --cpus-per-task=8 --nodelist="$WORKER_NODES" bash -c '
  export DMLC_ROLE=worker DMLC_WORKER_ID=$SLURM_NODEID
  export BYTEPS_LOCAL_RANK=$SLURM_LOCALID BYTEPS_LOCAL_SIZE=$SLURM_NTASKS_PER_NODE
  exec "$@"' ddlbench-task ddlbench run --workload resnet50 --method wfbp-a2a --note 'two words' --backend byteps || status=$?
# Workers are done: the scheduler and servers have nothing left to serve.
kill "$SCHEDULER" "$SERVERS" 2>/dev/null || true
wait || true
exit "$status"
