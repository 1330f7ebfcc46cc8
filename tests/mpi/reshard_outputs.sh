#!/usr/bin/env bash
# boost-reshard's output and --layout: a bad layout is a usage error (exit 2,
# one line); an OUT that would destroy an input (OUT or OUT.tmp is IN), that
# is a FIFO, or whose directory is missing is refused before anything is
# written (exit 1, IN unchanged); a full disk fails at the reservation with
# one line, serially and under mpirun, with nothing left behind.
source "$(dirname "$0")/ckpt_common.bash"
make_data
RESHARD=$B/tools/boost-reshard
[ -x "$RESHARD" ] || fail "$RESHARD not built"
train 0 "$tmp/a.log" --set train.steps=2 --set ckpt.every=2 --set ckpt.dir="$tmp/ck" || fail "training: $(tail -3 "$tmp/a.log")"
A=$tmp/ck/step_00000002.h5
sum_a=$(sha256sum <"$A")

expect() { # want_status message_regex description command...
  local want=$1 re=$2 what=$3 rc=0
  shift 3
  "$@" >"$tmp/bad.out" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || fail "$what: exit $rc, expected $want: $(cat "$tmp/bad.out")"
  [ "$(grep -c 'boost-reshard:' "$tmp/bad.out")" = 1 ] || fail "$what: expected one line: $(cat "$tmp/bad.out")"
  grep -q "boost-reshard: $re" "$tmp/bad.out" || fail "$what: $(cat "$tmp/bad.out")"
}
o=$tmp/o.h5
expect 2 "--layout dp=99999999999: expected a whole number from 1 to 65536" "an overflowing dp" "$RESHARD" "$A" "$o" --layout dp=99999999999
expect 2 "--layout tp=-2: expected a whole number" "a negative tp" "$RESHARD" "$A" "$o" --layout tp=-2
expect 2 "--layout 'dp=4096,tp=4096': dp\*tp\*pp = 16777216 ranks" "too many ranks" "$RESHARD" "$A" "$o" --layout dp=4096,tp=4096
expect 2 "--layout is empty" "an empty layout" "$RESHARD" "$A" "$o" --layout ""
expect 2 "--layout 'tp=2,tp=4' gives tp twice" "a repeated key" "$RESHARD" "$A" "$o" --layout tp=2,tp=4
expect 2 "bad --layout item '' in 'tp=2,'" "a trailing comma" "$RESHARD" "$A" "$o" --layout tp=2,
expect 2 "unknown --layout key 'ranks'" "an unknown key" "$RESHARD" "$A" "$o" --layout ranks=2
expect 2 "--layout mode=fast: expected btp, vanilla or megatron" "an unknown mode" "$RESHARD" "$A" "$o" --layout mode=fast
expect 2 "--layout wants a value" "--layout without a value" "$RESHARD" "$A" "$o" --layout
expect 2 "--json goes with --plan" "--json without --plan" "$RESHARD" "$A" "$o" --layout tp=2 --json
expect 2 "--plan writes nothing: drop OUT" "--plan with OUT" "$RESHARD" "$A" "$o" --plan --layout tp=2
[ ! -e "$o" ] && [ ! -e "$o.tmp" ] || fail "a usage error wrote a file"
echo "ok: bad --layout and option combinations are usage errors (exit 2, one line)"

expect 1 "output $A is the input" "OUT = IN" "$RESHARD" "$A" "$A" --layout tp=2
ln "$A" "$tmp/hard.h5"
expect 1 "output $tmp/hard.h5 is the input" "OUT a hard link of IN" "$RESHARD" "$tmp/ck" "$tmp/hard.h5" --layout tp=2
cp "$A" "$tmp/in.h5.tmp"
expect 1 "the output's temporary $tmp/in.h5.tmp is the input" "OUT.tmp = IN" "$RESHARD" "$tmp/in.h5.tmp" "$tmp/in.h5" --layout tp=2
[ "$(sha256sum <"$tmp/in.h5.tmp")" = "$sum_a" ] || fail "the input named OUT.tmp was changed"
mkfifo "$tmp/fifo"
expect 1 "output $tmp/fifo exists and is not a regular file" "OUT a FIFO" "$RESHARD" "$A" "$tmp/fifo" --layout tp=1
[ -p "$tmp/fifo" ] || fail "the FIFO was replaced"
expect 1 "cannot write $tmp/nodir/o.h5: directory $tmp/nodir: No such file or directory" "OUT in a missing directory" \
  "$RESHARD" "$A" "$tmp/nodir/o.h5" --layout tp=2
expect 1 "the output path is empty" "an empty OUT" "$RESHARD" "$A" "" --layout tp=2
[ "$(sha256sum <"$A")" = "$sum_a" ] || fail "IN changed"
echo "ok: an OUT that would destroy an input, a FIFO, a missing directory or an empty name is refused, IN unchanged"

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: not root: cannot mount a size-limited tmpfs (full disk not tested)"
elif mkdir -p "$tmp/mnt" && mount -t tmpfs -o size=1000k tmpfs "$tmp/mnt" 2>"$tmp/mount.err"; then
  CLEANUP="umount '$tmp/mnt'"
  # ~1.2 MiB of checkpoint does not fit in 1000k: before the reservation
  # HDF5 crashed (serial) or the ranks hung in MPI-IO (mpirun)
  expect 1 "cannot reserve [0-9.]* MiB for o.h5.tmp: No space left on device (OUT $tmp/mnt/o.h5)" "a full disk" \
    timeout 60 "$RESHARD" "$A" "$tmp/mnt/o.h5" --layout tp=2 --quiet
  expect 1 "cannot reserve [0-9.]* MiB for o.h5.tmp: No space left on device" "a full disk under mpirun" \
    timeout 60 $MPIRUN -n 2 "$RESHARD" "$A" "$tmp/mnt/o.h5" --layout tp=2 --quiet
  [ -z "$(ls -A "$tmp/mnt")" ] || fail "a failed rewrite left files on the full disk: $(ls "$tmp/mnt")"
  echo "ok: a full disk fails at the reservation with one line, serially and on 2 ranks, nothing left"
else
  echo "SKIP: mount -t tmpfs failed ($(cat "$tmp/mount.err")): full disk not tested"
fi
echo "PASS: reshard_outputs"
