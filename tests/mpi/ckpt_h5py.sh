#!/usr/bin/env bash
# Interop: h5py (Debian python3-h5py, serial HDF5) reads EVERY dataset of a
# checkpoint written by two ranks (weights, moments, loss history, sampled
# activations and tokens) through our plugin (HDF5_PLUGIN_PATH) and gets
# exactly the values our in-process reader gets (boost-inspect --dump-all);
# h5dump reads one too. The stored checksums are recomputed in numpy from the
# documented definition (xxh3-64-elemsum-v1), whose per-element term is
# checked against libxxhash's own XXH3_64bits_withSeed through ctypes. Twice:
# an fp32 run, and a train.precision=bf16 run whose activations h5py reads
# from their bfloat16 file type as float32 (checksums over those values).
source "$(dirname "$0")/ckpt_common.bash"
make_data
if ! "$PY" -c 'import h5py, numpy' 2>/dev/null; then
  echo "SKIP: h5py/numpy not importable by $PY (Debian: python3-h5py): interop not tested"
  exit 0
fi
[ -f "$HDF5_PLUGIN_PATH/libh5z_zstd.so" ] || fail "plugin not built in $HDF5_PLUGIN_PATH"
for p in fp32 bf16; do
  d=$tmp/ck-$p
  train 2 "$tmp/t.log" --set ckpt.dir="$d" --set train.steps=2 --set ckpt.activations=sample --set train.precision=$p ||
    fail "$p run: $(tail -5 "$tmp/t.log")"
  f=$d/step_00000002.h5
  mkdir "$tmp/dump-$p"
  "$INSPECT" --dump-all "$tmp/dump-$p" "$f" >"$tmp/dump.log" 2>&1 || fail "boost-inspect --dump-all: $(cat "$tmp/dump.log")"

"$PY" - "$f" "$tmp/dump-$p" "$p" <<'PYEOF' || fail "h5py check ($p)"
import ctypes, ctypes.util, os, sys
import h5py, numpy as np
path, dump, precision = sys.argv[1], sys.argv[2], sys.argv[3]
M, K = np.uint64(0x9FB21C651E98DF25), np.uint64(0xC73AB174C5ECD5A2)

def rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))

def terms32(u32, k):
    """XXH3_64bits_withSeed(le32(x), 4, k) for arrays (xxh3-64-elemsum-v1 term)."""
    s = k & np.uint64(0xFFFFFFFF)
    bs = ((s >> np.uint64(24)) | ((s >> np.uint64(8)) & np.uint64(0xFF00)) |
          ((s << np.uint64(8)) & np.uint64(0xFF0000)) | ((s << np.uint64(24)) & np.uint64(0xFF000000)))
    seed = k ^ (bs << np.uint64(32))
    v = u32.astype(np.uint64)
    h = (v + (v << np.uint64(32))) ^ (K - seed)
    h ^= rotl(h, 49) ^ rotl(h, 24)
    h *= M
    h ^= (h >> np.uint64(35)) + np.uint64(4)
    h *= M
    return h ^ (h >> np.uint64(28))

# The formula against the real library, on values and seeds that matter.
lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
lib.XXH3_64bits_withSeed.restype = ctypes.c_uint64
lib.XXH3_64bits_withSeed.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64]
rng = np.random.default_rng(1)
vals = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
seeds = np.array(list(range(20)) + [2**32 - 1, 2**32, 2**32 + 5, 2**63 + 11] + list(rng.integers(0, 2**63, 40)), dtype=np.uint64)
mine = terms32(vals, seeds)
for v, s, t in zip(vals, seeds, mine):
    b = ctypes.create_string_buffer(int(v).to_bytes(4, "little"), 4)
    assert lib.XXH3_64bits_withSeed(b, 4, int(s)) == int(t), (v, s)

def elemsum(a):
    flat = np.ascontiguousarray(a).reshape(-1)
    if flat.dtype.itemsize == 8:   # int64 datasets: the 8-byte form, via the library
        tot = 0
        for i, x in enumerate(flat.view(np.uint64)):
            b = ctypes.create_string_buffer(int(x).to_bytes(8, "little"), 8)
            tot = (tot + lib.XXH3_64bits_withSeed(b, 8, i)) % 2**64
        return tot
    k = np.arange(flat.size, dtype=np.uint64)
    return int(terms32(flat.view(np.uint32), k).sum(dtype=np.uint64))

names = []
with h5py.File(path, "r") as f:
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    cats = {}
    for n in names:
        ds = f[n]
        a = ds[...]                                    # through the plugin
        raw = np.fromfile(os.path.join(dump, n.replace("/", "__") + ".bin"), dtype=a.dtype.newbyteorder("<"))
        assert raw.size == a.size, (n, raw.size, a.size)
        assert np.array_equal(a.reshape(-1).view(np.uint8), raw.view(np.uint8)), f"{n}: h5py and our reader differ"
        assert int(ds.attrs["xxh3_elemsum"]) == elemsum(a), f"{n}: checksum differs from the documented definition"
        if not n.startswith("state/"):  # the training state: small, contiguous
            assert "32015" in ds._filters and "shuffle" in ds._filters, (n, ds._filters)
        c = n.split("/")[0]
        cats[c] = cats.get(c, 0) + 1
        t = ds.id.get_type()
        if precision == "bf16" and c == "activations" and n.endswith(".h"):
            # bfloat16: a 2-byte float with bf16's fields, read as float32 whose low half is zero
            assert t.get_size() == 2 and t.get_fields() == (15, 7, 8, 0, 7) and t.get_ebias() == 127, (n, t.get_fields())
            assert a.dtype == np.float32 and not (a.view(np.uint32) & 0xFFFF).any(), n
        elif n in ("state/val_loss_history", "state/run_starts", "state/guard_events", "state/skipped_batches", "state/guard_replays"):
            # float64 tables with their columns named
            assert a.dtype == np.float64 and a.ndim == 2 and len(ds.attrs["columns"].split()) == a.shape[1], n
        elif n == "state/grad_norm_history":  # float64, one per step
            assert a.dtype == np.float64 and a.ndim == 1, n
        elif n not in ("activations/tokens", "activations/sample_index"):
            assert t.get_size() == 4 and a.dtype == np.float32, (n, t.get_size(), a.dtype)
    assert f.attrs["format"] in (b"boost-checkpoint", "boost-checkpoint"), f.attrs["format"]
    assert int(f.attrs["step"]) == 2 and int(f.attrs["format_version"]) == 1
    assert f.attrs["precision"] in (precision, precision.encode()), f.attrs["precision"]
    assert f["activations/tokens"].shape == (2, 64), f["activations/tokens"].shape   # replica 0's micro-batch (B=2, T=64)
    assert f["activations/tokens"][...].max() < 320
print(f"ok ({precision}): h5py read {len(names)} datasets {cats} through the plugin: values equal ours, checksums match the definition")
PYEOF
done
h5dump -d /model/final_norm -c 4 "$f" >"$tmp/h5dump.txt" 2>&1 || fail "h5dump: $(cat "$tmp/h5dump.txt")"
grep -q "(0):" "$tmp/h5dump.txt" || fail "h5dump printed no data: $(cat "$tmp/h5dump.txt")"
echo "ok: h5dump reads /model/final_norm through the plugin"
h5dump -d /activations/layers.0.attn.qkv.h -c 1,1,4 "$f" >"$tmp/h5dump.txt" 2>&1 || fail "h5dump of bf16: $(cat "$tmp/h5dump.txt")"
grep -q "16-bit little-endian floating-point" "$tmp/h5dump.txt" && grep -q "(0,0,0):" "$tmp/h5dump.txt" ||
  fail "h5dump does not read the bf16 activation: $(cat "$tmp/h5dump.txt")"
echo "ok: h5dump reads a bfloat16 activation through the plugin"
echo "PASS: ckpt_h5py"
