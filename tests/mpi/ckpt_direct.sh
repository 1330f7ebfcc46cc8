#!/usr/bin/env bash
# The direct checkpoint writer (ckpt/write/ckpt_direct.c: each rank shuffles and
# compresses its own chunks, rank 0 places them, every rank writes them with
# pwrite) against HDF5's collective filtered writes (BOOST_CKPT_DIRECT=0),
# on the same training run: checkpoints.jsonl names the writer; the two
# files hold the same datasets with the same pipeline and chunk shapes, every
# stored chunk byte for byte the same where the chunk is whole, and the same
# values everywhere (h5py, serial HDF5, through the plugin); both verify.
# The same for tp=2 with ckpt.activations=all, whose shards and replica
# rows cut the global-shape chunks: its chunks follow the shards (one writer
# per chunk), so it is written directly too, and both writers agree. Then
# the writer's own failure: a disk that fills while the chunks are written
# (no reservation).
source "$(dirname "$0")/ckpt_common.bash"
make_data

writer_of() { # the writer of the last line of a checkpoints.jsonl
  "$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1]).get("writer"))' "$1"
}

for direct in 1 0; do
  BOOST_CKPT_DIRECT=$direct train 2 "$tmp/t$direct.log" --set ckpt.dir="$tmp/d$direct" --set parallel.dp=2 \
    --set train.steps=2 --set ckpt.activations=sample || fail "run (BOOST_CKPT_DIRECT=$direct): $(tail -5 "$tmp/t$direct.log")"
done
[ "$(writer_of "$tmp/d1/checkpoints.jsonl")" = direct ] || fail "dp=2: writer $(writer_of "$tmp/d1/checkpoints.jsonl"), expected direct"
[ "$(writer_of "$tmp/d0/checkpoints.jsonl")" = collective ] || fail "BOOST_CKPT_DIRECT=0: writer is not collective"
for direct in 1 0; do
  "$INSPECT" verify "$tmp/d$direct" >"$tmp/v$direct.log" 2>&1 || fail "verify (BOOST_CKPT_DIRECT=$direct): $(tail -3 "$tmp/v$direct.log")"
done

same_files() { # A B: the same datasets, pipeline, chunk shapes; whole chunks byte for byte
if "$PY" -c 'import h5py, numpy' 2>/dev/null; then
  "$PY" - "$1" "$2" <<'PYEOF' || fail "direct and collective files differ: $1 $2"
import sys
import h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
other = []
b.visititems(lambda n, o: other.append(n) if isinstance(o, h5py.Dataset) else None)
assert sorted(names) == sorted(other), "different datasets"
whole = edge = 0
for n in names:
    x, y = a[n], b[n]
    assert x.dtype == y.dtype and x.shape == y.shape, n
    assert x.chunks == y.chunks, (n, x.chunks, y.chunks)
    assert x.id.get_create_plist().get_nfilters() == y.id.get_create_plist().get_nfilters(), n
    for i in range(x.id.get_create_plist().get_nfilters()):
        fx, fy = x.id.get_create_plist().get_filter(i), y.id.get_create_plist().get_filter(i)
        assert fx[0] == fy[0] and fx[2] == fy[2], (n, fx, fy)
    # the run record holds each run's wall-clock times (start, last save):
    # its values and checksum differ from run to run
    if n != "state/run_starts":
        assert dict(x.attrs) == dict(y.attrs) or all(np.array_equal(x.attrs[k], y.attrs[k]) for k in x.attrs), n
        assert np.array_equal(x[()], y[()]), n + ": values differ"
    if x.chunks is None:
        continue
    assert x.id.get_num_chunks() == y.id.get_num_chunks(), n
    for i in range(x.id.get_num_chunks()):
        ix = x.id.get_chunk_info(i)
        iy = y.id.get_chunk_info_by_coord(ix.chunk_offset)
        assert ix.filter_mask == 0 and iy.filter_mask == 0, n
        inside = all(o + c <= s for o, c, s in zip(ix.chunk_offset, x.chunks, x.shape))
        if inside:  # whole chunks: the same bytes (the padding of edge chunks is unspecified)
            assert x.id.read_direct_chunk(ix.chunk_offset)[1] == y.id.read_direct_chunk(ix.chunk_offset)[1], (n, ix.chunk_offset)
            whole += 1
        else:
            edge += 1
print(f"{len(names)} datasets equal; {whole} whole chunks byte for byte, {edge} edge chunks by value")
PYEOF
else
  echo "SKIP part: h5py/numpy not importable by $PY: chunk bytes not compared (values compared by diff below)"
fi
}
same_files "$tmp/d1/step_00000002.h5" "$tmp/d0/step_00000002.h5"
"$INSPECT" diff "$tmp/d1" "$tmp/d0" >"$tmp/diff.log" 2>&1 || fail "boost-inspect diff: $(tail -3 "$tmp/diff.log")"
[ "$(checksums "$tmp/d1")" = "$(checksums "$tmp/d0")" ] || fail "checksums differ between the writers"
echo "ok: dp=2 direct and collective files agree"

# A resumed run reads the direct writer's file like any other.
train 2 "$tmp/r.log" --set ckpt.dir="$tmp/d1" --set parallel.dp=2 --set train.steps=3 --set ckpt.resume=auto ||
  fail "resume from the direct file: $(tail -5 "$tmp/r.log")"
grep -q "resumed from .*step_00000002.h5" "$tmp/r.log" || fail "did not resume from step 2: $(grep -i resum "$tmp/r.log" | head -2)"

# Shards and replica rows that cut the global-shape chunks: tp=2 with every
# activation, and dp=2 with every activation. Chunks follow the shards, so
# the direct writer takes them; the collective writer makes the same file.
for lay in "parallel.tp=2" "parallel.dp=2"; do
  for direct in 1 0; do
    BOOST_CKPT_DIRECT=$direct train 2 "$tmp/l$direct.log" --set ckpt.dir="$tmp/l$direct" --set "$lay" --set train.steps=1 \
      --set ckpt.activations=all || fail "$lay (BOOST_CKPT_DIRECT=$direct): $(tail -5 "$tmp/l$direct.log")"
    "$INSPECT" verify "$tmp/l$direct" >/dev/null 2>&1 || fail "$lay (BOOST_CKPT_DIRECT=$direct): the checkpoint does not verify"
  done
  [ "$(writer_of "$tmp/l1/checkpoints.jsonl")" = direct ] || fail "$lay, activations all: written by the $(writer_of "$tmp/l1/checkpoints.jsonl") writer, expected direct"
  same_files "$tmp/l1/step_00000001.h5" "$tmp/l0/step_00000001.h5"
  [ "$(checksums "$tmp/l1")" = "$(checksums "$tmp/l0")" ] || fail "$lay: checksums differ between the writers"
  echo "ok: $lay with ckpt.activations=all written by the direct writer, the same file as the collective one's, verifies"
  rm -rf "$tmp/l1" "$tmp/l0"
done

# A disk that fills while the chunks are written: no reservation, so the
# pwrite of a chunk (not HDF5) meets ENOSPC. Needs root for the tmpfs.
if [ "$(id -u)" = 0 ] && mkdir -p "$tmp/mnt" && mount -t tmpfs -o size=600k tmpfs "$tmp/mnt" 2>/dev/null; then
  CLEANUP="umount '$tmp/mnt'"
  rc=0
  BOOST_CKPT_TEST_NO_RESERVE=1 train 2 "$tmp/full.log" --set ckpt.dir="$tmp/mnt/ck" --set parallel.dp=2 \
    --set train.steps=2 || rc=$?
  [ "$rc" = 74 ] || fail "full disk: exit $rc, expected 74 (the final checkpoint failed): $(tail -3 "$tmp/full.log")"
  grep -q "finished at step 2, but its final state was NOT committed" "$tmp/full.log" || fail "full disk: training did not reach its end: $(grep -v "^  " "$tmp/full.log" | tail -4)"
  grep -q "checkpoint of step 2 FAILED" "$tmp/full.log" || fail "no failure on a full disk: $(grep -i ckpt "$tmp/full.log" | tail -2)"
  grep -q "No space left on device" "$tmp/full.log" || fail "ENOSPC not named: $(grep FAILED "$tmp/full.log" | head -1)"
  [ -z "$(ls "$tmp/mnt/ck" | grep -v -e checkpoints.jsonl -e '^\.lock$' -e '^run\.id$' || true)" ] ||
    fail "left behind on the full disk: $(ls -a "$tmp/mnt/ck")"
  echo "ok: a disk filling during the chunk writes fails the checkpoint, names ENOSPC, leaves nothing"
else
  echo "SKIP part: cannot mount a size-limited tmpfs (not root?): ENOSPC during chunk writes not tested"
fi
echo "PASS: ckpt_direct"
