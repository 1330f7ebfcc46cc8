#!/usr/bin/env bash
# boost-inspect (docs/INSPECT.md): every subcommand on a real checkpoint of the
# tiny preset, --json parses everywhere, diff with itself is all zeros, the
# spectrum matches numpy, the old flag forms still work, and every subcommand
# rejects a missing file, a non-HDF5 file, a non-checkpoint HDF5 file and an
# unknown format version with one line and exit 1 (usage errors: 2).
set -euo pipefail
source "$BOOST_SOURCE_DIR/tests/mpi/ckpt_common.bash"
make_data
train 0 "$tmp/t.log" --set ckpt.dir="$tmp/c" --set train.steps=3 || fail "train: $(tail -3 "$tmp/t.log")"
f=$tmp/c/step_00000003.h5
J() { "$PY" -m json.tool >/dev/null || fail "$1: --json output does not parse"; }

# Every subcommand, text and --json.
"$INSPECT" verify "$f" >"$tmp/v.txt" || fail "verify of a fresh checkpoint: $(cat "$tmp/v.txt")"
grep -q "^verify: ok" "$tmp/v.txt" || fail "verify: $(tail -1 "$tmp/v.txt")"
for s in summary tensors stats spectrum verify; do
  "$INSPECT" $s "$f" >/dev/null || fail "$s"
  "$INSPECT" $s --json "$f" | J "$s"
  "$INSPECT" $s --help | grep -q "usage: boost-inspect $s" || fail "$s --help"
done
"$INSPECT" --help | grep -q "spectrum" || fail "--help"
"$INSPECT" summary --json "$tmp/c" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert d["step"]==3 and d["loss_history"]["count"]==3 and d["format_version"]==1 and d["config"]["model.preset"]=="tiny", d' ||
  fail "summary --json fields"
"$INSPECT" stats --json "$f" --tensor model/embed.weight | J "stats --tensor"
"$INSPECT" diff "$f" "$tmp/c" | tail -1 | grep -q "^diff: 0 datasets differ" || fail "diff with itself"
"$INSPECT" diff --json "$f" "$f" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
assert d["differing_datasets"] == 0 and len(d["datasets"]) > 100
for t in d["datasets"]:
    if t["name"] in ("/state/run_starts", "/state/guard_events", "/state/skipped_batches", "/state/guard_replays"):
        assert t["status"] == "run record, not compared", t; continue
    assert t["status"] == "compared" and t["max_abs"] == 0 and t["max_rel"] == 0, t' || fail "diff --json with itself is not all zeros"
"$INSPECT" list --json "$tmp/c" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert d[0]["latest"] and d[0]["step"]==3' || fail "list --json"
mkdir "$tmp/empty"
"$INSPECT" list "$tmp/empty" | grep -q "no checkpoints" || fail "list of an empty directory says nothing"
"$INSPECT" list --json "$tmp/empty" | J "list empty"

# dump: with or without the leading slash, same bytes as h5py.
"$INSPECT" dump model/embed.weight "$tmp/e1.bin" "$f" >/dev/null || fail "dump without /"
"$INSPECT" dump /model/embed.weight "$tmp/e2.bin" "$f" >/dev/null || fail "dump with /"
"$INSPECT" dump --json --category weights "$tmp/w.bin" "$f" | J "dump --json"
cmp -s "$tmp/e1.bin" "$tmp/e2.bin" || fail "dump differs with and without /"
"$PY" - "$f" "$tmp/e1.bin" "$tmp/c" <<'PY' || fail "dump or spectrum disagree with h5py/numpy"
import h5py, json, numpy as np, subprocess, sys, os
f = h5py.File(sys.argv[1], "r")
assert np.array_equal(np.fromfile(sys.argv[2], "<f4").reshape(320, 64), f["model/embed.weight"][...])
sp = json.loads(subprocess.check_output([os.environ["BOOST_BINARY_DIR"] + "/tools/boost-inspect", "spectrum", "--json", sys.argv[1]]))
A, B = f["model/layers.1.attn.qkv.A"][...].astype(np.float64), f["model/layers.1.attn.qkv.B"][...].astype(np.float64)
for k in range(3):
    s = np.linalg.svd(B[k] @ A[k], compute_uv=False)[:A.shape[1]]
    got = [x for x in sp if x["group"] == "layers.1.attn.qkv.A" and x["projection"] == k][0]
    assert np.allclose(got["singular_values"], s, rtol=1e-9, atol=1e-12), (got["singular_values"][:3], s[:3])
A, B = f["model/layers.0.attn.o.A"][...].astype(np.float64), f["model/layers.0.attn.o.B"][...].astype(np.float64)
got = [x for x in sp if x["group"] == "layers.0.attn.o.A"][0]
assert np.allclose(got["singular_values"], np.linalg.svd(B @ A, compute_uv=False)[:16], rtol=1e-9)
PY

# plot (gnuplot-nox from scripts/install-deps.sh; skipped where missing).
if command -v gnuplot >/dev/null; then
  "$INSPECT" plot "$f" -o "$tmp/loss.png" >/dev/null || fail "plot"
  [ "$(head -c 4 "$tmp/loss.png" | tail -c 3)" = PNG ] || fail "plot did not write a PNG"
  "$INSPECT" plot --json "$f" -o "$tmp/loss2.png" | J "plot"
else
  echo "note: gnuplot not installed, plot not run"
fi

# The old flag forms (tests/mpi/*.sh, bench/ use them).
"$INSPECT" --verify "$f" | tail -1 | grep -q "^verify: ok" || fail "--verify"
"$INSPECT" --json "$f" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert len(d["tensors"]) == 136 and d["tensors"][0]["checksum"]' || fail "--json PATH"
"$INSPECT" --json --no-tensors "$f" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert "tensors" not in d and d["step"] == 3' || fail "--json --no-tensors"
"$INSPECT" --list "$tmp/c" | grep -q latest || fail "--list"
"$INSPECT" --dump model/embed.weight "$tmp/e3.bin" "$f" >/dev/null && cmp -s "$tmp/e1.bin" "$tmp/e3.bin" || fail "--dump"
mkdir "$tmp/all" && "$INSPECT" --dump-all "$tmp/all" "$f" >/dev/null && [ -f "$tmp/all/model__embed.weight.bin" ] || fail "--dump-all"

# Bad inputs: one line, exit 1; usage errors exit 2.
echo "not hdf5" >"$tmp/junk.h5"
"$PY" - "$tmp" "$f" <<'PY'
import h5py, numpy as np, shutil, sys
with h5py.File(sys.argv[1] + "/plain.h5", "w") as f: f["x"] = np.arange(4)
shutil.copy(sys.argv[2], sys.argv[1] + "/v2.h5")
with h5py.File(sys.argv[1] + "/v2.h5", "r+") as f: f.attrs.modify("format_version", np.int64(2))
PY
for bad in "$tmp/missing.h5" "$tmp/junk.h5" "$tmp/plain.h5" "$tmp/v2.h5"; do
  for s in summary tensors stats spectrum verify "plot -o $tmp/x.png" "dump --all $tmp/all" diff; do
    extra=""; [ "$s" = diff ] && extra=$f
    set +e; $INSPECT $s "$bad" $extra >"$tmp/o.txt" 2>"$tmp/e.txt"; rc=$?; set -e
    [ $rc = 1 ] || fail "$s $(basename "$bad"): exit $rc, expected 1: $(cat "$tmp/e.txt")"
    [ "$(wc -l <"$tmp/e.txt")" = 1 ] || fail "$s $(basename "$bad"): not one line: $(cat "$tmp/e.txt")"
  done
done
grep -q "unknown checkpoint format version 2" "$tmp/e.txt" || fail "unknown version not named: $(cat "$tmp/e.txt")"
set +e; "$INSPECT" verify --json "$tmp/v2.h5" 2>/dev/null | J "verify --json on a bad file"; "$INSPECT" frobnicate "$f" 2>/dev/null; rc1=$?
"$INSPECT" verify 2>/dev/null; rc2=$?; "$INSPECT" stats "$f" --bogus 2>/dev/null; rc3=$?; set -e
[ "$rc1$rc2$rc3" = 222 ] || fail "usage errors exit $rc1 $rc2 $rc3, expected 2"

# A config that cannot be read or does not match the tensors: verify fails naming it.
for mut in 'f.attrs.modify("config", np.bytes_(b"{not json"))' 'del f.attrs["config"]' \
           'c = json.loads(f.attrs["config"]); c["model.n_layers"] = 2; del f.attrs["config"]; f.attrs["config"] = np.bytes_(json.dumps(c, separators=(",", ":")).encode())' \
           'del f["model/layers.3.mlp.down.B"]' 'f.attrs.modify("step", np.int64(5))' 'del f["optim/adam_m/final_norm"]'; do
  cp "$f" "$tmp/m.h5"
  "$PY" -c "import h5py, json, numpy as np
f = h5py.File('$tmp/m.h5', 'r+'); $mut" || fail "h5py: $mut"
  if "$INSPECT" verify "$tmp/m.h5" >"$tmp/m.txt" 2>&1; then fail "verify says ok after: $mut"; fi
  grep -q "^BAD " "$tmp/m.txt" || fail "no problem named after $mut: $(cat "$tmp/m.txt")"
done
# A key another version of boost wrote (and this one does not know, like the
# removed train.out_dir) is skipped, as the trainer's resume skips it.
cp "$f" "$tmp/old.h5"
"$PY" -c "import h5py, json, numpy as np
f = h5py.File('$tmp/old.h5', 'r+'); c = json.loads(f.attrs['config']); c['train.out_dir'] = 'runs/x'
del f.attrs['config']; f.attrs['config'] = np.bytes_(json.dumps(c, separators=(',', ':')).encode())" || fail "h5py: add an unknown key"
"$INSPECT" verify "$tmp/old.h5" >"$tmp/old.txt" 2>&1 || fail "verify refuses a config key of another version: $(cat "$tmp/old.txt")"
echo "ok: boost-inspect subcommands, --json, diff, spectrum, old flags, bad inputs"
