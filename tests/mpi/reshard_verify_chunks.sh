#!/usr/bin/env bash
# boost-reshard and boost-inspect verify read tensors through the chunk
# reader (ckpt/read/ckpt_slab.h: stored chunks decoded on every thread). Against
# the H5Dread path (BOOST_CKPT_SLAB_HDF5=1, what the tools did before): the
# same verify report (text and --json), the same OUT files (h5dump -p: every
# value, attribute, chunk shape, filter and stored size) serially, under
# mpirun and from a bf16 export (whose tensors go through H5Dread); and a
# flipped byte in a stored chunk is reported naming the tensor, through the
# chunk reader's own message, with no OUT left behind.
source "$(dirname "$0")/ckpt_common.bash"
RESHARD=$B/tools/boost-reshard
[ -x "$RESHARD" ] || fail "$RESHARD not built"
command -v h5dump >/dev/null || { echo "SKIP: h5dump not installed (Debian: hdf5-tools)"; exit 77; }
make_data
train 0 "$tmp/t.log" --set ckpt.dir="$tmp/c" --set train.steps=2 --set ckpt.activations=sample ||
  fail "train: $(tail -3 "$tmp/t.log")"
f=$tmp/c/step_00000002.h5
export OMP_NUM_THREADS=2 # the tools decode on two threads

# ---- verify: the same report through either path -----------------------------
for out in "" --json; do
  "$INSPECT" verify $out "$f" >"$tmp/v.new" 2>&1 || fail "verify $out: $(tail -3 "$tmp/v.new")"
  BOOST_CKPT_SLAB_HDF5=1 "$INSPECT" verify $out "$f" >"$tmp/v.old" 2>&1 || fail "verify $out (H5Dread): $(tail -3 "$tmp/v.old")"
  cmp -s "$tmp/v.new" "$tmp/v.old" || fail "verify $out differs between the paths: $(diff "$tmp/v.old" "$tmp/v.new" | head -6)"
done
grep -q "^verify: ok (154 datasets decoded and checksummed, 0 problems)" "$tmp/v.new" ||
  grep -q '"decoded":[[:space:]]*154' "$tmp/v.new" || fail "verify: unexpected report: $(tail -3 "$tmp/v.new")"
echo "ok: verify reports the same through the chunk reader and through H5Dread"

# ---- reshard: the same OUT through either path ------------------------------
dump() { h5dump -p "$1" | tail -n +2; } # the first line names the file
same_out() { # tag IN [mpirun ranks] args...
  local tag=$1 in=$2 np=$3 run=()
  shift 3
  [ "$np" = 0 ] || run=($MPIRUN -x BOOST_CKPT_SLAB_HDF5 -n "$np")
  BOOST_CKPT_SLAB_HDF5=0 "${run[@]}" "$RESHARD" "$in" "$tmp/$tag.new.h5" "$@" >"$tmp/$tag.new.out" 2>&1 ||
    fail "$tag: $(tail -3 "$tmp/$tag.new.out")"
  BOOST_CKPT_SLAB_HDF5=1 "${run[@]}" "$RESHARD" "$in" "$tmp/$tag.old.h5" "$@" >"$tmp/$tag.old.out" 2>&1 ||
    fail "$tag (H5Dread): $(tail -3 "$tmp/$tag.old.out")"
  sed -i "s|$tmp/$tag.old.h5|OUT|" "$tmp/$tag.old.out"
  sed -i "s|$tmp/$tag.new.h5|OUT|" "$tmp/$tag.new.out"
  cmp -s "$tmp/$tag.new.out" "$tmp/$tag.old.out" || fail "$tag: the output differs: $(diff "$tmp/$tag.old.out" "$tmp/$tag.new.out")"
  dump "$tmp/$tag.new.h5" >"$tmp/$tag.new.dump" && dump "$tmp/$tag.old.h5" >"$tmp/$tag.old.dump" || fail "$tag: h5dump failed"
  cmp -s "$tmp/$tag.new.dump" "$tmp/$tag.old.dump" ||
    fail "$tag: OUT differs between the paths: $(diff "$tmp/$tag.old.dump" "$tmp/$tag.new.dump" | head -6)"
  "$INSPECT" verify "$tmp/$tag.new.h5" >/dev/null 2>&1 || fail "$tag: OUT does not verify"
}
same_out serial "$f" 0 --layout tp=2
same_out parallel "$f" 2 --layout tp=2,dp=2
same_out bf16 "$f" 0 --layout tp=1 --bf16
same_out from_bf16 "$tmp/bf16.new.h5" 0 --layout tp=2
echo "ok: boost-reshard writes the same OUT through either path (serial, 2 ranks, to and from bf16)"

# ---- a flipped byte in a stored chunk ------------------------------------------
T=/optim/adam_v/layers.1.attn.qkv.A
off=$("$PY" -c 'import h5py, sys
c = h5py.File(sys.argv[1], "r")[sys.argv[2]].id.get_chunk_info(0)
print(c.byte_offset + c.size // 2)' "$f" "$T")
cp "$f" "$tmp/flip.h5"
"$PY" -c 'import sys
p, o = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read()); b[o] ^= 0x10; open(p, "wb").write(b)' "$tmp/flip.h5" "$off"
rc=0
"$INSPECT" verify "$tmp/flip.h5" >"$tmp/vf.out" 2>"$tmp/vf.err" || rc=$?
[ "$rc" = 1 ] || fail "verify of the flipped file: exit $rc: $(cat "$tmp/vf.out")"
grep -q "^BAD $T: a stored chunk does not decode" "$tmp/vf.out" ||
  fail "verify did not report the flipped chunk through the chunk reader: $(cat "$tmp/vf.out")"
[ "$(grep -c '^BAD' "$tmp/vf.out")" = 1 ] || fail "verify: more than the one damaged tensor: $(cat "$tmp/vf.out")"
for np in 0 2; do
  run=()
  [ "$np" = 0 ] || run=($MPIRUN -n "$np")
  rc=0
  "${run[@]}" "$RESHARD" "$tmp/flip.h5" "$tmp/fo.h5" --layout tp=2 >"$tmp/rf.out" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "reshard ($np ranks) of the flipped file: exit $rc: $(cat "$tmp/rf.out")"
  [ "$(grep -c '^boost-reshard:' "$tmp/rf.out")" = 1 ] && grep -q "^boost-reshard: $T: " "$tmp/rf.out" ||
    fail "reshard ($np ranks): expected one line naming $T: $(cat "$tmp/rf.out")"
  grep -q "^boost-reshard: $T: a stored chunk does not decode" "$tmp/rf.out" ||
    fail "reshard ($np ranks) did not read the flipped chunk through the chunk reader: $(cat "$tmp/rf.out")"
  [ ! -e "$tmp/fo.h5" ] && [ ! -e "$tmp/fo.h5.tmp" ] || fail "reshard ($np ranks) of a damaged IN left a file"
done
echo "ok: a flipped byte in a stored chunk fails verify and boost-reshard (serial and 2 ranks), naming $T"
echo PASS
