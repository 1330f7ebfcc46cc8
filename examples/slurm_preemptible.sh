#!/usr/bin/env bash
# A SLURM batch script for preemptible partitions: the job checkpoints every
# ckpt.every steps; when it is told to stop -- two minutes before its time
# limit (--signal), at preemption, at scancel -- every rank commits a final
# checkpoint and exits 75; the script then requeues itself, and the next
# allocation -- whatever nodes and GPU count it gets -- resumes from the
# newest checkpoint (ckpt.resume=auto; the resume plan keeps the global
# batch on another layout).
#
#   sbatch examples/slurm_preemptible.sh
#
# Copy it and set the resources, the layout and the config for your run.
#
# How the stop reaches the ranks, and how long the final save may take:
#
#  - srun (below; Open MPI built with SLURM/PMIx support, `srun --mpi=list`
#    shows pmix): the ranks are srun's tasks. `--signal=TERM@120` (no `B:`)
#    sends SIGTERM to every task 120 s before the time limit; the time limit
#    itself, scancel and preemption send SIGTERM (with SIGCONT) to every
#    process of the job and SIGKILL `KillWait` seconds later (slurm.conf,
#    default 30; after `GraceTime` for preemption: `scontrol show config |
#    grep -E 'KillWait|GraceTime'`). Each rank takes SIGTERM itself, so the
#    final save has until the SIGKILL: 120 s + KillWait at the time limit,
#    KillWait after scancel, GraceTime at preemption; a repeated SIGTERM
#    does not cut it short. srun exits with the highest exit status of its
#    tasks: 75.
#  - mpirun: start it through tools/mpirun/boost-mpirun and warn the batch shell
#    instead, `#SBATCH --signal=B:TERM@120`: the wrapper turns SIGTERM into
#    SIGUSR1, which mpirun forwards and waits for, and mpirun itself never
#    sees a stop signal (plain mpirun kills the ranks ~1 s after a SIGTERM
#    reaches it and exits 1; boost-train says so at start). Set
#    BOOST_LAUNCHER=mpirun and change the --signal line.
#
# Check the cluster and its file system first: tools/chaos/boost-chaos (docs/CHAOS.md).
#SBATCH --job-name=boost-cola
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=runs/%x/slurm-%j.out
# SIGTERM to the tasks 120 s before the end (for mpirun: B:TERM@120).
#SBATCH --signal=TERM@120
set -u
cd "${SLURM_SUBMIT_DIR:-.}"
run=runs/${SLURM_JOB_NAME:-boost-cola}
mkdir -p "$run"

# tp x pp must divide the ranks this allocation has; dp follows from them.
ranks=${SLURM_NTASKS:-8}
tp=2
pp=1
dp=$((ranks / (tp * pp)))

train=(build/trainer/boost-train
  --config examples/quickstart.ini
  --set model.preset=cola-60m
  --set parallel.dp="$dp" --set parallel.tp="$tp" --set parallel.pp="$pp"
  --set train.steps=20000
  --set ckpt.dir="$run/ckpt" --set ckpt.every=200 --set ckpt.keep_last=3 --set ckpt.keep_every=2000
  --set train.metrics="$run/metrics.jsonl")

status=0
case ${BOOST_LAUNCHER:-srun} in
srun) srun --mpi=pmix -n "$ranks" "${train[@]}" || status=$? ;;
mpirun) tools/mpirun/boost-mpirun --grace 110 -n "$ranks" "${train[@]}" || status=$? ;;
*)
  echo "boost: BOOST_LAUNCHER must be srun or mpirun" >&2
  exit 1
  ;;
esac

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
