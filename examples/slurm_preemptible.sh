#!/usr/bin/env bash
# A SLURM batch script for preemptible partitions: the job checkpoints every
# ckpt.every steps, is told two minutes before its time limit or preemption
# (--signal), commits a final checkpoint and exits 75; the script then
# requeues itself, and the next allocation -- whatever nodes and GPU count
# it gets -- resumes from the newest checkpoint (ckpt.resume=auto; the resume
# plan keeps the global batch on another layout).
#
#   sbatch examples/slurm_preemptible.sh
#
# Copy it and set the resources, the layout and the config for your run.
#SBATCH --job-name=boost-cola
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=runs/%x/slurm-%j.out
# SIGTERM to the batch shell 120 s before the end: tools/boost-mpirun turns
# it into SIGUSR1 for mpirun, which forwards it to every rank and waits.
#SBATCH --signal=B:TERM@120
set -u
cd "${SLURM_SUBMIT_DIR:-.}"
run=runs/${SLURM_JOB_NAME:-boost-cola}
mkdir -p "$run"

# tp x pp must divide the ranks this allocation has; dp follows from them.
ranks=${SLURM_NTASKS:-8}
tp=2
pp=1
dp=$((ranks / (tp * pp)))

status=0
tools/boost-mpirun --grace 110 -n "$ranks" build/run/boost-train \
  --config examples/quickstart.ini \
  --set model.preset=cola-60m \
  --set parallel.dp="$dp" --set parallel.tp="$tp" --set parallel.pp="$pp" \
  --set train.steps=20000 \
  --set ckpt.dir="$run/ckpt" --set ckpt.every=200 --set ckpt.keep_last=3 --set ckpt.keep_every=2000 \
  --set train.metrics="$run/metrics.jsonl" || status=$?

case $status in
0) echo "boost: done" ;;
75)
  echo "boost: preempted after a committed checkpoint: requeueing"
  scontrol requeue "${SLURM_JOB_ID}"
  ;;
74) echo "boost: the final state was NOT committed (see the log): not requeued automatically" ;;
*) echo "boost: failed with status $status" ;;
esac
exit "$status"
