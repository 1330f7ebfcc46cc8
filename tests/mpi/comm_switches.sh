#!/usr/bin/env bash
# The communication switches (parallel.comm, parallel.nccl_single;
# docs/CUDA.md): without train.device=cuda and NCCL they are refused with
# one line on every layout -- a singleton and two ranks, which refuse
# together (no rank left waiting) -- and parallel.comm=mpi trains (the
# guarded backend at dp=2: what ranks sharing one GPU run).
source "$(dirname "$0")/ckpt_common.bash"
make_data

# refused NP NEEDLE args...: exit non-zero, one stderr line with NEEDLE, no step trained.
refused() {
  local np=$1 needle=$2 rc=0
  shift 2
  train "$np" "$tmp/r.log" --set train.steps=2 "$@" 2>/dev/null || rc=$?
  [ "$rc" != 0 ] || fail "$* on $np ranks trained"
  grep -q "^step " "$tmp/r.log" && fail "$* on $np ranks trained before refusing"
  [ "$(grep -c "^boost-train: .*$needle" "$tmp/r.log")" = 1 ] ||
    fail "$* on $np ranks: expected one line naming '$needle': $(grep -v '^  ' "$tmp/r.log" | tail -4)"
  echo "refused on $np ranks: $(grep "^boost-train: .*$needle" "$tmp/r.log")"
}

for np in 0 2; do
  refused $np "parallel.nccl_single needs train.device=cuda" --set parallel.nccl_single=true
  refused $np "parallel.comm=nccl needs train.device=cuda" --set parallel.comm=nccl
done
train 2 "$tmp/mpi.log" --set train.steps=2 --set parallel.comm=mpi --set train.device=guarded ||
  fail "parallel.comm=mpi did not train: $(tail -3 "$tmp/mpi.log")"
grep -q "comm dp allreduce" "$tmp/mpi.log" || fail "parallel.comm=mpi: no dp all-reduce counted"
echo "PASS: comm_switches"
