#!/usr/bin/env bash
# boost-inspect verify never says ok on a damaged checkpoint (issue 8).
#
# A small real checkpoint (tiny preset, 1 layer, stored activations) gets one
# bit flipped per trial: at every other byte outside the raw data chunks (all
# HDF5 metadata: superblock, object headers, group and chunk indexes, heaps,
# and free space) and at every 64th byte of the whole file. Each trial must end
# with verify reporting a problem, or -- where the byte is one HDF5 never reads
# (free space, padding) -- with verify reading content identical to the
# original (every dataset's values and every attribute: equal digests). Never
# a crash. The sweep runs in process (tools/testkit/inspect_verify_files.c, one fork
# per trial, the verifier of boost-inspect on an in-memory image); then a
# sample of flips goes through the boost-inspect binary itself, whose "ok"
# answers are checked against the original with h5py, and through the
# trainer's loader (boost-train resuming from the flipped file, zero steps
# to run): the two must agree. verify ok <=> the loader resumes without a
# word; the loader refuses => verify reports damage; verify reports damage
# => the loader refuses, or every problem is in the stored activations
# (training does not need them) and the loader resumes warning about them.
set -euo pipefail
source "$BOOST_SOURCE_DIR/tests/mpi/ckpt_common.bash"
SWEEP=$B/tools/inspect_verify_files
[ -x "$SWEEP" ] || fail "$SWEEP not built"
make_data
train 0 "$tmp/t.log" --set ckpt.dir="$tmp/c" --set train.steps=2 --set model.n_layers=1 --set ckpt.activations=sample ||
  fail "train: $(tail -3 "$tmp/t.log")"
f=$tmp/c/step_00000002.h5
"$INSPECT" verify "$f" >/dev/null || fail "the fresh checkpoint does not verify"

"$SWEEP" --flip "$f" "${INSPECT_FLIP_META_STRIDE:-2}" "${INSPECT_FLIP_DATA_STRIDE:-64}" >"$tmp/sweep.txt" 2>&1 ||
  fail "flip sweep: $(grep FAIL "$tmp/sweep.txt" | head -20) $(tail -1 "$tmp/sweep.txt")"
tail -1 "$tmp/sweep.txt"

# The binary on a sample: 40 metadata offsets and 20 data offsets.
LOADER=("$TRAIN" --set data.train="$tmp/f.tok" "${COMMON[@]}" --set train.steps=2 --set model.n_layers=1
        --set ckpt.activations=sample)
"$PY" - "$f" "$tmp" "$INSPECT" "${LOADER[@]}" <<'PY' || fail "boost-inspect verify / the loader on flipped files (above)"
import h5py, numpy as np, random, shutil, subprocess, sys
src, tmp, inspect = sys.argv[1:4]
loader = sys.argv[4:]
data = bytearray(open(src, "rb").read())
raw = bytearray(len(data))
with h5py.File(src, "r") as f:
    def mark(name, obj):
        if not isinstance(obj, h5py.Dataset): return
        off = obj.id.get_offset()
        if off is not None:
            raw[off:off + obj.id.get_storage_size()] = b"\1" * obj.id.get_storage_size(); return
        if obj.id.get_create_plist().get_layout() != h5py.h5d.CHUNKED: return  # contiguous and empty: no bytes
        for k in range(obj.id.get_num_chunks()):
            c = obj.id.get_chunk_info(k); raw[c.byte_offset:c.byte_offset + c.size] = b"\1" * c.size
    f.visititems(mark)
def content(path):
    out = {}
    with h5py.File(path, "r") as f:
        out["/"] = {k: np.array(v).tobytes() for k, v in f.attrs.items()}
        def walk(name, obj):
            out[name] = {k: np.array(v).tobytes() for k, v in obj.attrs.items()}
            if isinstance(obj, h5py.Dataset): out[name]["<data>"] = obj[...].tobytes()
        f.visititems(walk)
    return out
orig = content(src)
rng = random.Random(8)
meta = [i for i in range(len(data)) if not raw[i]]
acts = bytearray(len(data))
with h5py.File(src, "r") as f:
    for d in f["activations"].values():
        for k in range(d.id.get_num_chunks()):
            c = d.id.get_chunk_info(k); acts[c.byte_offset:c.byte_offset + c.size] = b"\1" * c.size
offs = (rng.sample(meta, 40) + rng.sample([i for i in range(len(data)) if raw[i] and not acts[i]], 20) +
        rng.sample([i for i in range(len(data)) if acts[i]], 10))
bad = 0
tally = {}
for off in offs:
    d = bytearray(data); d[off] ^= 1 << (off % 8)
    p = tmp + "/flip.h5"; open(p, "wb").write(d)
    r = subprocess.run([inspect, "verify", p], capture_output=True, text=True)
    l = subprocess.run(loader + ["--set", "ckpt.resume=" + p], capture_output=True, text=True, timeout=120)
    loaded = l.returncode == 0 and "resumed from " + p in l.stdout
    warned = "stored activations damaged" in l.stderr
    if l.returncode not in (0, 1) or (l.returncode == 0) != loaded:
        print(f"offset {off}: loader exit {l.returncode}: {l.stderr.strip()[-300:]}"); bad += 1; continue
    key = ("verify ok" if r.returncode == 0 else "verify bad") + ", " + ("loader refused" if not loaded else "loader warned" if warned else "loader loaded")
    tally[key] = tally.get(key, 0) + 1
    if r.returncode not in (0, 1):
        print(f"offset {off}: verify exit {r.returncode}: {r.stderr.strip()[:300]}"); bad += 1; continue
    if r.returncode == 0:
        if not loaded or warned:
            print(f"offset {off}: verify says ok, the loader {'warns' if loaded else 'refuses'}: {l.stderr.strip()[-300:]}"); bad += 1; continue
        try: same = content(p) == orig
        except Exception as e: same = False
        if not same: print(f"offset {off}: verify says ok but h5py reads different content"); bad += 1
        continue
    problems = [x for x in r.stdout.splitlines() if x.startswith("BAD ")]
    only_acts = problems and all(x.startswith(("BAD /activations", "BAD file structure: /activations")) for x in problems)
    if loaded and not (warned and only_acts):
        print(f"offset {off}: verify reports {problems[:3]}, the loader resumes {'warning' if warned else 'silently'}"); bad += 1
print(f"binary sample: {len(offs)} flips, {bad} wrong; " + "; ".join(f"{v} {k}" for k, v in sorted(tally.items())))
sys.exit(1 if bad else 0)
PY
echo "ok: verify reported or read identical content for every flip, the loader agreed; no crash"
