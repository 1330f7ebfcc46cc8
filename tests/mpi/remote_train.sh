#!/usr/bin/env bash
# The remote level with the real trainer, against SeaweedFS (or the store
# BOOST_S3_STORE names, see remote_common.bash) on 127.0.0.1:
# a 2-rank run (dp=2) uploads its checkpoint files in the background
# (ckpt.remote); its ckpt.dir is deleted (the machine is gone); a relaunch
# on another layout (1 rank) finds nothing local, downloads the newest
# committed remote checkpoint, resumes from it (level `remote` in
# checkpoints.jsonl and the start line), and its losses and final state equal,
# bit for bit, those of the same relaunch resuming from the file itself (run
# A's local level is deleted too). A missing bucket
# and wrong credentials refuse the start with one line; bad settings too.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/remote_common.bash"
make_data
open_store s3://boost-train/run
BASE=(--set train.min_lr_ratio=1 --set ckpt.every=4 --set model.seq_len=32)
A=(--set parallel.dp=2 --set train.batch_size=2)
Bl=(--set parallel.dp=1 --set train.batch_size=4)

# 1. Layout A, 8 steps, uploading.
train 2 "$tmp/a.log" "${BASE[@]}" "${A[@]}" "${R[@]}" --set train.steps=8 --set ckpt.dir="$tmp/a" \
  --set ckpt.local_every=2 --set ckpt.local_dir="$tmp/a_local" || fail "run A: $(tail -5 "$tmp/a.log")"
grep -q "local step 6" "$tmp/a.log" || fail "run A did not save to its local level: $(grep -i local "$tmp/a.log" | head -3)"
grep -q "checkpoint: remote step 8 uploaded to s3://boost-train/run" "$tmp/a.log" ||
  fail "run A did not upload step 8: $(grep -i remote "$tmp/a.log")"
expect_line "newest 8" sh -c "\"$RC\" s3://boost-train/run newest | cut -d' ' -f1-2"
cp -r "$tmp/a" "$tmp/a_copy" # the reference resumes from the file itself
rm -rf "$tmp/a" "$tmp/a_local"
echo "ok: run A uploaded step 8; its ckpt.dir and local level deleted"

# 2. Another layout resumes from the remote.
train 0 "$tmp/b.log" "${BASE[@]}" "${Bl[@]}" "${R[@]}" --set train.steps=12 --set ckpt.dir="$tmp/b" \
  --set train.metrics="$tmp/b.jsonl" || fail "run B: $(tail -5 "$tmp/b.log")"
grep -q "checkpoint: remote step 8 is newer than" "$tmp/b.log" || fail "run B did not download: $(grep -i remote "$tmp/b.log")"
grep -q '"level":"remote"' "$tmp/b/checkpoints.jsonl" || fail "checkpoints.jsonl does not name the level: $(head -3 "$tmp/b/checkpoints.jsonl")"
# The reference: the same relaunch from the file.
train 0 "$tmp/ref.log" "${BASE[@]}" "${Bl[@]}" --set train.steps=12 --set ckpt.dir="$tmp/a_copy" \
  --set train.metrics="$tmp/ref.jsonl" || fail "reference: $(tail -5 "$tmp/ref.log")"
diff <(losses "$tmp/b.jsonl") <(losses "$tmp/ref.jsonl") >/dev/null || fail "losses differ from the resume from the file"
"$INSPECT" diff "$tmp/b/step_00000012.h5" "$tmp/a_copy/step_00000012.h5" >"$tmp/diff.out" ||
  fail "boost-inspect diff: $(tail -3 "$tmp/diff.out")"
grep -q "^diff: 0 datasets differ$" "$tmp/diff.out" ||
  fail "the final state differs from the resume from the file: $(grep -v '(0 differ)' "$tmp/diff.out" | head -5)"
[ "$(losses "$tmp/b.jsonl" | head -1 | cut -d' ' -f1)" = 9 ] || fail "run B did not resume at step 9"
grep -q "checkpoint: remote step 12 uploaded" "$tmp/b.log" || fail "run B did not upload step 12"
grep -q "(downloaded from the remote level)" "$tmp/b.log" || fail "the start line does not name the remote level: $(grep -i resumed "$tmp/b.log")"
"$INSPECT" summary "$tmp/b/step_00000012.h5" >"$tmp/b.summary" || fail "boost-inspect summary"
grep -q "steps 8-12 .*, from the remote level (object store)$" "$tmp/b.summary" ||
  fail "boost-inspect summary does not name the remote level: $(grep -A3 starts: "$tmp/b.summary")"
echo "ok: relaunch on 1 rank resumed from the remote step 8, losses 9-12 and the final state equal to the file's resume"

# 2b. The tools read s3:// checkpoints (downloaded into a private temporary directory, removed at exit).
tmpd=$tmp/tooltmp
mkdir -p "$tmpd"
AWS_ENDPOINT_URL=$BOOST_S3_ENDPOINT TMPDIR=$tmpd "$INSPECT" summary s3://boost-train/run >"$tmp/s3.summary" ||
  fail "boost-inspect summary s3://: $(cat "$tmp/s3.summary")"
"$INSPECT" summary "$tmp/b/step_00000012.h5" >"$tmp/local.summary"
# The same but the path, and the start's level, which comes from checkpoints.jsonl beside the file (not downloaded).
strip() { grep -v step_00000012.h5 "$1" | sed 's/, from the remote level (object store)$//'; }
diff <(strip "$tmp/s3.summary") <(strip "$tmp/local.summary") >/dev/null ||
  fail "summary of s3:// differs from the file's: $(diff "$tmp/s3.summary" "$tmp/local.summary" | head -12 | tr "\n" " ")"
AWS_ENDPOINT_URL=$BOOST_S3_ENDPOINT TMPDIR=$tmpd "$INSPECT" verify s3://boost-train/run/step_000000000008 >/dev/null ||
  fail "boost-inspect verify of step 8 by its s3:// name"
[ -z "$(ls -A "$tmpd")" ] || fail "the tools left their download behind: $(ls -R "$tmpd")"
AWS_ENDPOINT_URL=$BOOST_S3_ENDPOINT "$INSPECT" summary s3://boost-train/run/step_000000000005 >/dev/null 2>"$tmp/err" &&
  fail "a step without a manifest was read"
grep -q "step_000000000005/manifest.json: not found" "$tmp/err" || fail "missing step: $(cat "$tmp/err")"
echo "ok: boost-inspect reads s3:// checkpoints (newest and by step), leaves nothing behind; a missing step in one line"

# 3. Refused at start, one line each.
refuse() { # WANT-REGEX args...
  local want=$1
  shift
  train 0 "$tmp/r.log" "${BASE[@]}" --set train.steps=2 --set ckpt.dir="$tmp/r" "$@" && fail "started: $*"
  grep -qE "$want" "$tmp/r.log" || fail "$*: $(cat "$tmp/r.log")"
  ! grep -qF "$S3_SECRET" "$tmp/r.log" || fail "the secret was printed"
  echo "ok: $(grep -E "$want" "$tmp/r.log" | head -1)"
}
refuse "bucket 'no-such-bucket' does not exist" --set ckpt.remote=s3://no-such-bucket/x --set ckpt.remote_endpoint="$BOOST_S3_ENDPOINT"
AWS_SECRET_ACCESS_KEY=wrong refuse "access denied" "${R[@]}"
refuse "is not an s3://BUCKET/PREFIX URL" --set ckpt.remote=gs://b/x
refuse "is not an http:// or https:// URL" --set ckpt.remote=s3://b/x --set ckpt.remote_endpoint=localhost:9000
echo "remote_train: all passed"
