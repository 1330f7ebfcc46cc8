#!/usr/bin/env bash
# A rank stuck inside a watched wait, not stopped: the wait is one the
# watchdog must see (docs/PARALLELISM.md, "The collective watchdog").
#  1. Rank 1 of two (dp=2) sleeps inside an agreement (the control plane,
#     comm_control) from step 3: the job ends within the timeout + a few
#     seconds, exit 74, naming the agreement's group and step 3.
#  2. Rank 1's device waits never complete from step 3 (the guarded
#     backend through the poll loop the CUDA backend's stream synchronizes
#     use, kernels/device_wait.h: the emulation of a GPU waiting forever for
#     a queued NCCL collective): exit 74, a device wait named with its
#     group and step 3.
#  3. Rank 1's device wait fails (a device error, as a stream query or the
#     NCCL poll reports one): the job ends at once, exit 74, one line naming
#     the error, the wait, its group and step 3.
#  4. The same on one rank, where the watchdog does not run: one line, 74.
# Both ranks' watchdogs may fire in 1 and 2 (each waits); every line must
# name a group. No rank is left behind.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/watchdog_common.bash"
make_data
T=3 # parallel.timeout of every run here

# stuck CASE WHERE PATTERN args...: rank 1 stuck at step 3 (WHERE: control
# or device); the job ends in time with exit 74, one or two watchdog lines,
# each naming a group's wait in step 3, one of them matching PATTERN.
stuck() {
  local case=$1 where=$2 pattern=$3 n
  shift 3
  launch_stuck "$where" "rank 1 gets stuck in its next" "$@"
  end_within $((T + 12))
  n=$(grep -c "^boost-train: watchdog:" "$log" || true)
  echo "$case. rc $rc after $secs s:"
  grep "^boost-train: watchdog:" "$log" || true
  [ "$n" -ge 1 ] && [ "$n" -le 2 ] || fail "$case: $n watchdog lines, expected 1 or 2: $(tail -5 "$log")"
  [ "$rc" = 74 ] || fail "$case: exit $rc, expected 74"
  ! grep "^boost-train: watchdog:" "$log" | grep -Evq \
    "^boost-train: watchdog: rank [01] has waited [0-9]+ s in (tp|dp|pp|world) [a-z -]+ \((after )?collective [0-9]+ on (tp|dp|pp|world)\) in step 3, longer than parallel.timeout=$T s; not arrived: .*; ending the job with exit 74 \(step [23] done" ||
    fail "$case: a watchdog line does not name a group's wait in step 3"
  grep "^boost-train: watchdog:" "$log" | grep -Eq "$pattern" || fail "$case: no watchdog line matches '$pattern'"
  no_rank_left
}

# 1. An agreement: rank 1 sleeps inside it, rank 0 waits in it.
stuck 1 control "in (tp|dp|pp|world) [a-z -]*agreement|control allreduce"
# 2. A device wait through the guarded backend's poll loop.
stuck 2 device "device (sync|download)" --set train.device=guarded

# 3. The device wait fails instead (a device or NCCL error, as the CUDA
# backend's stream query or the NCCL poll reports it): the job ends at once
# through the same path, naming the error and the wait, exit 74.
launch_stuck device-error "rank 1 gets stuck in its next device wait, which fails" --set train.device=guarded
end_within 10
line=$(grep "^boost-train: watchdog: rank 1: " "$log" || true)
echo "3. rc $rc after $secs s: $line"
[ "$rc" = 74 ] || fail "3: exit $rc, expected 74"
[ "$(grep -c "^boost-train: watchdog: rank 1: " "$log")" = 1 ] || fail "3: expected one failure line: $(tail -4 "$log")"
echo "$line" | grep -Eq "^boost-train: watchdog: rank 1: the device wait \(device (sync|download)\) failed \(mpi backend\): the device reports an error \(test hook\), waiting in (tp|dp|pp|world) device (sync|download) \(after collective [0-9]+ on (tp|dp|pp|world)\) in step 3; not arrived: .*; ending the job with exit 74" ||
  fail "3: the line does not name the error and the wait"
no_rank_left

# 4. The same in a world of one rank (the watchdog stands down there; the
# failure path still ends the run with one line, the caller's thread doing it).
rc=0
BOOST_TRAIN_TEST_STUCK_AT=3:0:device-error train 0 "$tmp/single.log" --set train.steps=100000 \
  --set train.device=guarded --set parallel.timeout=$T || rc=$?
line=$(grep "^boost-train: watchdog:" "$tmp/single.log" || true)
echo "4. rc $rc: $line"
[ "$rc" = 74 ] || fail "4: exit $rc, expected 74: $(tail -3 "$tmp/single.log")"
echo "$line" | grep -Eq "^boost-train: watchdog: rank 0: the device wait \(device (sync|download)\) failed \(mpi backend\): the device reports an error \(test hook\); not arrived: none \(a world of one rank\); ending the job with exit 74" ||
  fail "4: the line does not name the error"
echo "PASS: parallel_watchdog_stuck"
