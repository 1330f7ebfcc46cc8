#!/usr/bin/env bash
# A device error on one rank ends every rank at once, naming the rank and
# the error (kernels/job_abort.h: the one module that ends a job), instead
# of leaving the other rank waiting in its next collective until the
# collective watchdog's timeout (60 s here).
#  1. Rank 1 of two (dp=2, the guarded backend) fails in an op at step 3,
#     as a CUDA call that returns an error does (cuda_check -> boost_fail):
#     both ranks are gone within 5 s of the failure (the bound is generous
#     for a loaded machine; it is a second on a quiet one), exit 1, one line
#     "boost-train: rank 1: ... the device reports an error in <op> ...", no
#     watchdog line.
#  2. Rank 1's device wait fails instead (a stream query or NCCL's poll
#     reports the error): the watchdog's failure path ends the job within
#     the same bound, exit 74, its line naming rank 1 and the error.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/watchdog_common.bash"
make_data
T=60      # parallel.timeout: a job left to the watchdog's timeout would take this long
BOUND=5   # seconds from the failure to the end of every rank

# fails CASE WHERE STARTED: rank 1 fails at step 3 (BOOST_TRAIN_TEST_STUCK_AT
# kind WHERE); waits for its announcement STARTED, then for the job's end.
fails() {
  launch_stuck "$2" "$3" --set train.device=guarded
  end_within $BOUND
  echo "$1. rc $rc, every rank gone $secs s after the failure was armed"
  no_rank_left
}

fails 1 op-error "rank 1 gets stuck in its next op, which fails"
line=$(grep "^boost-train: rank 1: " "$log" || true)
echo "   $line"
[ "$rc" = 1 ] || fail "1: exit $rc, expected 1: $(tail -4 "$log")"
[ "$(grep -c "^boost-train: rank 1: " "$log")" = 1 ] || fail "1: expected one line from rank 1: $(tail -4 "$log")"
echo "$line" | grep -Eq "^boost-train: rank 1: guarded backend: the device reports an error in [a-z_0-9]+ \(test hook" ||
  fail "1: the line does not name the rank and the error"
! grep -q "watchdog" "$log" || fail "1: the watchdog fired (the failure should end the job by itself)"
grep -q "^boost-train: rank 0: " "$log" && fail "1: rank 0 reported an error of its own"

fails 2 device-error "rank 1 gets stuck in its next device wait, which fails"
line=$(grep "^boost-train: watchdog: rank 1: " "$log" || true)
echo "   $line"
[ "$rc" = 74 ] || fail "2: exit $rc, expected 74: $(tail -4 "$log")"
echo "$line" | grep -Eq "^boost-train: watchdog: rank 1: the device wait \(device (sync|download)\) failed .*the device reports an error \(test hook\)" ||
  fail "2: the line does not name the rank and the error"
echo "PASS: job_abort_device_error"
