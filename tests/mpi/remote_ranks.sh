#!/usr/bin/env bash
# The remote level's upload spread over the ranks, against SeaweedFS (or
# the store BOOST_S3_STORE names) on 127.0.0.1: a 2-rank run whose checkpoint file is 3 parts of 5 MiB sends
# part 1 and 3 from rank 0 and part 2 from rank 1 (the upload line counts
# each rank's parts); the object downloads and checks against the manifest
# (whose part hashes came from both ranks). Then rank 1's share fails (a
# test hook): the upload is aborted (no manifest, no unfinished upload left),
# both ranks say so, and training goes on to its end.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/remote_common.bash"
make_data
open_store s3://boost-ranks/run
use_multipart_ckpt

# 1. Both ranks send parts.
train 2 "$tmp/a.log" "${BIG[@]}" "${R[@]}" --set train.steps=2 --set ckpt.dir="$tmp/a" ||
  fail "run A: $(tail -5 "$tmp/a.log")"
up=$(grep "checkpoint: remote step 2 uploaded" "$tmp/a.log") || fail "step 2 not uploaded: $(grep -i remote "$tmp/a.log")"
[[ $up =~ ([0-9]+)\ parts\ sent\ by\ 2\ ranks\ \(([0-9]+)\ ([0-9]+)\) ]] || fail "the upload line does not name 2 ranks: $up"
n=${BASH_REMATCH[1]} r0=${BASH_REMATCH[2]} r1=${BASH_REMATCH[3]}
[ "$n" -ge 2 ] && [ "$r0" -gt 0 ] && [ "$r1" -gt 0 ] && [ $((r0 + r1)) = "$n" ] || fail "not both ranks sent parts: $up"
got=$(rc s3://boost-ranks/run fetch "$tmp/back.h5") || fail "the shared upload does not download and check"
[[ $got == "newest 2 "* ]] || fail "newest: $got"
cmp -s "$tmp/back.h5" "$tmp/a/step_00000002.h5" || fail "the downloaded file differs from step 2's"
echo "ok: step 2's upload shared: $n parts, $r0 by rank 0 and $r1 by rank 1; downloaded, checked, equal to the file"

# 2. Rank 1's share fails: the upload is aborted, the run trains on.
BOOST_S3_TEST_FAIL_RANK=1 train 2 "$tmp/b.log" "${BIG[@]}" "${R[@]}" --set train.steps=4 --set ckpt.dir="$tmp/a" ||
  fail "run B stopped: $(tail -5 "$tmp/b.log")"
grep -q "remote: rank 1 could not send its parts of step 4: BOOST_S3_TEST_FAIL_RANK=1" "$tmp/b.log" ||
  fail "rank 1 did not say why: $(grep -i remote "$tmp/b.log")"
grep -q "remote: upload of step 4 FAILED (training continues; the remote level stays at step 2): .*rank 1 could not send its parts" \
  "$tmp/b.log" || fail "rank 0 did not say the upload failed: $(grep -i remote "$tmp/b.log")"
grep -q "step 4/4\|step 4 " "$tmp/b.log" || fail "training did not reach step 4: $(tail -3 "$tmp/b.log")"
expect_line "newest 2" sh -c "\"$RC\" s3://boost-ranks/run newest | cut -d' ' -f1-2"
expect_line "orphans 0" "$RC" s3://boost-ranks/run orphans
echo "ok: rank 1's failure reached rank 0: step 4's upload aborted (none left), the remote level stays at step 2, training ended"
echo "remote_ranks: all passed"
