#!/usr/bin/env bash
# Interop of the zstd HDF5 filter (id 32015) with foreign readers and writers:
#  (a) h5dump reads our file through the plugin in <build>/hdf5-plugins;
#  (b) without the plugin, h5dump cannot read the data (the plugin is what
#      makes (a) work);
#  (c) h5py reads our datasets through the plugin, bit for bit, and a stored
#      chunk is a plain zstd frame the zstd CLI decodes;
#  (d) h5py writes with compression=32015 through the plugin and our
#      in-process filter (plugin loading switched off) reads it back.
# (c) and (d) are skipped, with a SKIP: line, only when h5py is not installed.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }

B=${BOOST_BINARY_DIR:?BOOST_BINARY_DIR must point at the build directory}
PLUGINS=$B/hdf5-plugins
SAMPLE=$B/tools/h5z_zstd_sample
PY=/usr/bin/python3 # Debian's h5py and numpy belong to this interpreter

[ -x "$SAMPLE" ] || fail "$SAMPLE not built"
[ -f "$PLUGINS/libh5z_zstd.so" ] || fail "plugin $PLUGINS/libh5z_zstd.so not built"
command -v h5dump >/dev/null || fail "h5dump not found (Debian: hdf5-tools)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/h5_plugin_interop.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/no-plugins"
unset HDF5_PLUGIN_PATH HDF5_PLUGIN_PRELOAD

"$SAMPLE" write "$tmp/s.h5" "$tmp" || fail "h5z_zstd_sample write"

# ---- (a) h5dump through the plugin ------------------------------------------
HDF5_PLUGIN_PATH=$PLUGINS h5dump --enable-error-stack -p -H "$tmp/s.h5" >"$tmp/hdr.txt" 2>&1 ||
  fail "h5dump -p -H: $(cat "$tmp/hdr.txt")"
grep -q 'PREPROCESSING SHUFFLE' "$tmp/hdr.txt" || fail "no shuffle in the pipeline: $(cat "$tmp/hdr.txt")"
[ "$(grep -c 'FILTER_ID 32015' "$tmp/hdr.txt")" = 2 ] || fail "filter 32015 not on both datasets"

HDF5_PLUGIN_PATH=$PLUGINS h5dump --enable-error-stack -d /ramp -s 0,0 -c 2,5 "$tmp/s.h5" \
  >"$tmp/a.txt" 2>"$tmp/a.err" || fail "h5dump with plugin: $(cat "$tmp/a.err")"
[ ! -s "$tmp/a.err" ] || fail "h5dump with plugin reported errors: $(cat "$tmp/a.err")"
grep -qF '(0,0): -100, -99.75, -99.5, -99.25, -99,' "$tmp/a.txt" || fail "row 0 wrong: $(cat "$tmp/a.txt")"
grep -qF '(1,0): -90.75, -90.5, -90.25, -90, -89.75' "$tmp/a.txt" || fail "row 1 wrong: $(cat "$tmp/a.txt")"
# the last element sits in a partial edge chunk: (99*37+36)/4 - 100
HDF5_PLUGIN_PATH=$PLUGINS h5dump --enable-error-stack -d /ramp -s 99,36 -c 1,1 "$tmp/s.h5" \
  >"$tmp/a2.txt" 2>"$tmp/a2.err" || fail "h5dump with plugin (edge chunk)"
[ ! -s "$tmp/a2.err" ] || fail "h5dump with plugin reported errors: $(cat "$tmp/a2.err")"
grep -qF '(99,36): 824.75' "$tmp/a2.txt" || fail "edge element wrong: $(cat "$tmp/a2.txt")"
echo "ok (a): h5dump reads the zstd datasets through $PLUGINS"

# ---- (b) without the plugin h5dump cannot read the data ---------------------
# h5dump exits 0 even when H5Dread fails, so judge by what it prints.
HDF5_PLUGIN_PATH=$tmp/no-plugins h5dump --enable-error-stack -d /ramp -s 0,0 -c 2,5 "$tmp/s.h5" \
  >"$tmp/b.txt" 2>"$tmp/b.err" || true
if grep -qF -- '-99.75' "$tmp/b.txt"; then fail "h5dump read the data without the plugin?"; fi
grep -q 'is not registered' "$tmp/b.err" || fail "expected 'filter ... is not registered': $(cat "$tmp/b.err")"
echo "ok (b): without the plugin h5dump fails: $(grep -m1 -o "required filter.*registered" "$tmp/b.err")"

# ---- h5py --------------------------------------------------------------------
if ! "$PY" -c 'import h5py, numpy' 2>/dev/null; then
  echo "SKIP: h5py/numpy not importable by $PY; h5py interop checks (c) and (d) not run"
  exit 0
fi

# ---- (c) h5py reads our file through the plugin -----------------------------
HDF5_PLUGIN_PATH=$PLUGINS "$PY" - "$tmp" <<'EOF' || fail "(c) h5py read through the plugin"
import sys, numpy as np, h5py
d = sys.argv[1]
with h5py.File(f"{d}/s.h5", "r") as f:
    r = f["ramp"]
    assert "32015" in r._filters and "shuffle" in r._filters, r._filters
    a = r[...]
    exp = np.arange(100 * 37, dtype=np.float32).reshape(100, 37) * np.float32(0.25) - np.float32(100)
    assert a.dtype == np.float32 and a.shape == (100, 37), (a.dtype, a.shape)
    assert np.array_equal(a.view(np.uint32), exp.view(np.uint32)), "ramp differs from formula"
    raw = np.fromfile(f"{d}/ramp.f32", dtype="<f4").reshape(100, 37)
    assert np.array_equal(a.view(np.uint32), raw.view(np.uint32)), "ramp differs from writer's raw bytes"
    g = f["gauss"][...]
    graw = np.fromfile(f"{d}/gauss.f32", dtype="<f4")
    assert g.shape == graw.shape and np.array_equal(g.view(np.uint32), graw.view(np.uint32)), "gauss differs"
    assert abs(float(g.std()) - 1.0) < 0.1, "gauss is not Gaussian?"
    mask, chunk = r.id.read_direct_chunk((0, 0))
    assert mask == 0 and chunk[:4] == b"\x28\xb5\x2f\xfd", (mask, chunk[:4])
    open(f"{d}/chunk0.zst", "wb").write(chunk)
print("ok (c): h5py reads ramp and gauss bit for bit through the plugin")
EOF
if command -v zstd >/dev/null; then
  zstd -q -t "$tmp/chunk0.zst" || fail "stored chunk is not a valid zstd frame"
  n=$(zstd -q -d -c "$tmp/chunk0.zst" | wc -c)
  [ "$n" = 640 ] || fail "chunk 0 decompresses to $n bytes, expected 16*10*4 = 640"
  echo "ok (c): a stored chunk is a plain zstd frame (zstd -t passes, 640 bytes)"
fi

# ---- (d) h5py writes through the plugin, our in-process filter reads ---------
HDF5_PLUGIN_PATH=$PLUGINS "$PY" - "$tmp" <<'EOF' || fail "(d) h5py write through the plugin"
import sys, numpy as np, h5py
d = sys.argv[1]
rng = np.random.default_rng(7)
x = rng.standard_normal((300, 50)).astype(np.float32)   # chunks do not divide the shape
y = (np.arange(10000) % 251).astype(np.float32) * np.float32(0.5)
with h5py.File(f"{d}/py.h5", "w") as f:
    f.create_dataset("py_gauss", data=x, chunks=(64, 20), compression=32015, compression_opts=(5,),
                     shuffle=True)
    f.create_dataset("py_default", data=y, chunks=(999,), compression=32015)  # no cd_values
x.astype("<f4").tofile(f"{d}/py_gauss.f32")
y.astype("<f4").tofile(f"{d}/py_default.f32")
with h5py.File(f"{d}/py.h5", "r") as f:
    mask, chunk = f["py_gauss"].id.read_direct_chunk((0, 0))
    assert mask == 0 and chunk[:4] == b"\x28\xb5\x2f\xfd", (mask, chunk[:4])
    assert f["py_default"].id.get_storage_size() < y.nbytes / 4, "py_default was not compressed"
print("ok (d): h5py wrote py_gauss (shuffle + zstd level 5) and py_default (zstd, no cd_values)")
EOF
for ds in py_gauss py_default; do
  "$SAMPLE" read "$tmp/py.h5" "$ds" "$tmp/$ds.back.f32" >"$tmp/$ds.log" 2>&1 ||
    fail "in-process read of $ds: $(cat "$tmp/$ds.log")"
  grep -q 'id 32015' "$tmp/$ds.log" || fail "$ds does not use filter 32015: $(cat "$tmp/$ds.log")"
  cmp "$tmp/$ds.f32" "$tmp/$ds.back.f32" || fail "$ds read by the in-process filter differs from h5py's data"
done
echo "ok (d): our in-process filter (plugin loading off) reads h5py's datasets bit for bit"
echo "PASS: h5_plugin_interop"
