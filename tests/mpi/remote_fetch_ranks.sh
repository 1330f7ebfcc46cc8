#!/usr/bin/env bash
# The fresh start's download spread over the ranks, against SeaweedFS on
# 127.0.0.1: a 2-rank run uploads its checkpoint (3 parts of 5 MiB); its
# ckpt.dir is deleted; a 2-rank relaunch downloads the newest remote step
# with both ranks fetching parts (the start's line counts each rank's), the
# file equal to the one uploaded, and its losses equal those of a resume
# from the file itself. kill -9 of every rank in the middle of a download
# leaves only the temporary, which the next start removes before it
# downloads again. Then part 2 of the newest remote step is corrupted
# on the store, its manifest kept: that part is rank 1's (part i is rank
# i % 2's), so rank 1's share fails: the start refuses with one line naming
# rank 1 and its reason, leaves no temporary behind, and the older files in
# ckpt.dir are untouched. A download onto a full disk refuses the same way.
source "$(dirname "$0")/ckpt_common.bash"
source "$(dirname "$0")/local_common.bash"
source "$(dirname "$0")/remote_common.bash"
make_data
open_store s3://boost-fetch/run
use_multipart_ckpt
# Every file under a directory with its checksum, hidden ones too, but the
# job lock (.lock), which every start takes and writes its holder into.
snapshot() { (cd "$1" && find . -type f ! -name .lock -print0 | sort -z | xargs -0 sha256sum); }

# 1. Run A uploads steps 2 and 4; its ckpt.dir is gone.
train 2 "$tmp/a.log" "${BIG[@]}" "${R[@]}" --set train.steps=4 --set ckpt.dir="$tmp/a" ||
  fail "run A: $(tail -5 "$tmp/a.log")"
grep -q "checkpoint: remote step 4 uploaded" "$tmp/a.log" || fail "step 4 not uploaded: $(grep -i remote "$tmp/a.log")"
cp -r "$tmp/a" "$tmp/ref" # the reference resumes from the file itself
cp -r "$tmp/a" "$tmp/old" # older files for the failing start (3.)
rm -rf "$tmp/a"
echo "ok: run A uploaded step 4; its ckpt.dir deleted"

# 2. A fresh start on 2 ranks: both fetch parts.
train 2 "$tmp/b.log" "${BIG[@]}" "${R[@]}" --set train.steps=6 --set ckpt.dir="$tmp/b" \
  --set train.metrics="$tmp/b.jsonl" || fail "run B: $(tail -5 "$tmp/b.log")"
got=$(grep "checkpoint: remote step 4 is newer than" "$tmp/b.log") || fail "run B did not download: $(grep -i remote "$tmp/b.log")"
[[ $got =~ ([0-9]+)\ parts\ checked,\ fetched\ by\ 2\ ranks\ \(([0-9]+)\ ([0-9]+)\) ]] ||
  fail "the download line does not count 2 ranks' parts: $got"
n=${BASH_REMATCH[1]} r0=${BASH_REMATCH[2]} r1=${BASH_REMATCH[3]}
[ "$n" -ge 3 ] && [ "$r0" -gt 0 ] && [ "$r1" -gt 0 ] && [ $((r0 + r1)) = "$n" ] || fail "not both ranks fetched parts: $got"
cmp -s "$tmp/b/step_00000004.h5" "$tmp/ref/step_00000004.h5" || fail "the downloaded step 4 differs from the file uploaded"
grep -q "(downloaded from the remote level)" "$tmp/b.log" || fail "the start line does not name the remote level"
[ -z "$(find "$tmp/b" -name '*.tmp')" ] || fail "a temporary was left: $(find "$tmp/b" -name '*.tmp')"
train 2 "$tmp/ref.log" "${BIG[@]}" --set train.steps=6 --set ckpt.dir="$tmp/ref" --set train.metrics="$tmp/ref.jsonl" ||
  fail "reference: $(tail -5 "$tmp/ref.log")"
diff <(losses "$tmp/b.jsonl") <(losses "$tmp/ref.jsonl") >/dev/null || fail "losses differ from the resume from the file"
[ "$(losses "$tmp/b.jsonl" | head -1 | cut -d' ' -f1)" = 5 ] || fail "run B did not resume at step 5"
grep -q "checkpoint: remote step 6 uploaded" "$tmp/b.log" || fail "run B did not upload step 6"
echo "ok: fresh start on 2 ranks: $n parts, $r0 fetched by rank 0 and $r1 by rank 1; step 4 equal to the file, losses 5-6 equal to its resume"

# 2b. kill -9 of every rank in the middle of a download (parts slowed to 3 s):
# only the temporary is left, and the next start removes it and downloads again.
BOOST_S3_TEST_PART_DELAY_MS=3000 train_bg 2 "$tmp/k.log" "${BIG[@]}" "${R[@]}" --set train.steps=8 --set ckpt.dir="$tmp/k"
mp=$!
CLEANUP="kill -9 $mp 2>/dev/null"
for i in $(seq 1 600); do [ -e "$tmp/k/step_00000006.h5.tmp" ] && break; sleep 0.1; done
[ -e "$tmp/k/step_00000006.h5.tmp" ] || fail "the download did not begin: $(tail -5 "$tmp/k.log")"
kill_job $mp
[ ! -e "$tmp/k/step_00000006.h5" ] || fail "the killed download put a file in place"
train 2 "$tmp/k2.log" "${BIG[@]}" "${R[@]}" --set train.steps=8 --set ckpt.dir="$tmp/k" --set train.metrics="$tmp/k2.jsonl" ||
  fail "the restart after the kill: $(tail -5 "$tmp/k2.log")"
grep -q "removed 1 temporary left by an interrupted run (step_00000006.h5.tmp)" "$tmp/k2.log" ||
  fail "the killed download's temporary was not removed: $(grep -i "temporar\|remote" "$tmp/k2.log")"
grep -q "checkpoint: remote step 6 is newer than .*fetched by 2 ranks" "$tmp/k2.log" || fail "the restart did not download step 6"
[ "$(losses "$tmp/k2.jsonl" | head -1 | cut -d' ' -f1)" = 7 ] || fail "the restart did not resume at step 7"
grep -q "checkpoint: remote step 8 uploaded" "$tmp/k2.log" || fail "the restart did not upload step 8"
echo "ok: kill -9 mid-download left only step_00000006.h5.tmp; the restart removed it, downloaded step 6, resumed at 7"

# 2c. A full disk: ckpt.dir on a 6 MiB tmpfs, the newest remote step (8) is
# about 12 MiB. The start refuses in one line naming the disk's error and
# leaves no temporary behind (root only: mount).
mnt=$tmp/small
mkdir -p "$mnt"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=6m tmpfs "$mnt" 2>/dev/null; then
  CLEANUP="unmount_scratch $mnt"
  train 2 "$tmp/f.log" "${BIG[@]}" "${R[@]}" --set train.steps=10 --set ckpt.dir="$mnt/c" && fail "a start on a full disk trained"
  [ "$(grep -c "could not fetch\|could not put" "$tmp/f.log")" = 1 ] && grep -q "No space left on device" "$tmp/f.log" ||
    fail "full disk: not one line naming it: $(grep -v '^ *$' "$tmp/f.log" | tail -4)"
  [ -z "$(find "$mnt" -name '*.tmp')" ] || fail "the failed download left its temporary: $(find "$mnt" -name '*.tmp')"
  grep -qE "step +[0-9]+/10 \|" "$tmp/f.log" && fail "the start on a full disk trained"
  echo "ok: full disk: $(grep "could not" "$tmp/f.log" | head -1)"
  unmount_scratch "$mnt"
  CLEANUP=""
else
  echo "note: no tmpfs mount here (not root?): the full disk's download not tested"
fi

# 3. Part 2 of remote step 8 (the newest) corrupted on the store, its manifest kept.
man=run/step_000000000008/manifest.json
rc $U get $man "$T/man.json" || fail "cannot read step 8's manifest"
got=$(rc $U fetch "$T/eight.h5") || fail "step 8 does not download"
[[ $got == "newest 8 "* ]] || fail "newest: $got"
off=$(((5 << 20) + 4321)) # in part 2 (bytes 5 MiB to 10 MiB)
"$PY" -c 'import sys
f = open(sys.argv[1], "r+b"); o = int(sys.argv[2]); f.seek(o); b = f.read(1); f.seek(o); f.write(bytes([b[0] ^ 0x5a]))' \
  "$T/eight.h5" $off
rc $U push "$T/eight.h5" 8 >/dev/null || fail "cannot upload the corrupted step 8"
rc $U put $man "$T/man.json" || fail "cannot put step 8's manifest back"
rc $U fetch "$T/one.h5" 2>"$T/one.err" && fail "a corrupted part was taken"
grep -q "part 2 does not match its checksum in the manifest" "$T/one.err" || fail "one process: $(cat "$T/one.err")"
[ ! -e "$T/one.h5" ] && [ ! -e "$T/one.h5.tmp" ] || fail "the failed download left a file: $(ls "$T")"
echo "ok: part 2 of step 8 corrupted on the store; one process's download refuses it, leaves nothing"

# The failing start: ckpt.dir holds steps 2 and 4, the store's step 8 is newer.
before=$(snapshot "$tmp/old")
train 2 "$tmp/c.log" "${BIG[@]}" "${R[@]}" --set train.steps=10 --set ckpt.dir="$tmp/old" && fail "run C started"
want="rank 1 of 2 could not fetch its share of remote step 8: .*part 2 does not match its checksum in the manifest"
grep -q "$want" "$tmp/c.log" || fail "run C did not say rank 1's reason: $(cat "$tmp/c.log")"
[ "$(grep -c "could not fetch" "$tmp/c.log")" = 1 ] || fail "not one line: $(grep "could not fetch" "$tmp/c.log")"
[ "$(snapshot "$tmp/old")" = "$before" ] || fail "ckpt.dir changed: $(diff <(echo "$before") <(snapshot "$tmp/old"))"
grep -qE "step +5/6 \|" "$tmp/b.log" || fail "no step line in run B's log" # the line run C must not have
grep -qE "step +[0-9]+/10 \|" "$tmp/c.log" && fail "run C trained"
echo "ok: rank 1's share failed: $(grep "could not fetch" "$tmp/c.log")"
echo "ok: ckpt.dir untouched (no temporary, the same files byte for byte)"
echo "remote_fetch_ranks: all passed"
