#!/usr/bin/env bash
# Writes the fuzz seeds of boost-inspect's state histories (docs/INSPECT.md,
# "Fuzzing"):
#   tests/fuzz/seeds/tiny-history.h5     a real checkpoint of a run that
#                                        validated and was resumed once:
#                                        /state/val_loss_history and
#                                        /state/run_starts; it must verify
#   tests/fuzz/seeds/bad-history-*.h5    the same file with one thing wrong
#                                        in a history (below), its checksum
#                                        recomputed so that only the history
#                                        is wrong; verify must refuse each,
#                                        naming it
# tests/cli/inspect_fuzz_corpus.sh checks both. Run from anywhere:
#   bash tests/fuzz/make_history_seeds.sh [BUILD_DIR]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:-$src/build}
out=$src/tests/fuzz/seeds
PY=/usr/bin/python3 # Debian's h5py and numpy belong to this interpreter
export HDF5_PLUGIN_PATH=$B/hdf5-plugins OMP_NUM_THREADS=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_history_seeds.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$B/tools/boost-data" -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null
# The model of the other seeds (one tiny layer); 2 steps, then a resume to 4.
train() {
  "$B/trainer/boost-train" --set data.train="$tmp/f.tok" --set model.preset=tiny --set model.vocab=257 --set model.d_model=16 \
    --set model.n_layers=1 --set model.n_heads=2 --set model.ffn=32 --set model.seq_len=16 --set model.rank_attn=4 \
    --set model.rank_mlp=4 --set train.batch_size=1 --set train.val_every=1 --set train.val_batches=1 \
    --set train.threads=1 --set ckpt.dir="$tmp/c" --set ckpt.level=3 "$@" >"$tmp/t.log" 2>&1 || { tail -3 "$tmp/t.log"; exit 1; }
}
train --set train.steps=2
train --set train.steps=4
cp "$tmp/c/step_00000004.h5" "$out/tiny-history.h5"
"$B/tools/boost-inspect" verify "$out/tiny-history.h5" >/dev/null
"$PY" - "$out" <<'PYEOF'
import ctypes, ctypes.util, os, shutil, sys
import h5py, numpy as np
out = sys.argv[1]
seed = os.path.join(out, "tiny-history.h5")
lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
lib.XXH3_64bits_withSeed.restype = ctypes.c_uint64
lib.XXH3_64bits_withSeed.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64]

def elemsum64(a):
    """xxh3-64-elemsum-v1 of float64 values (the 8-byte form)."""
    flat = np.ascontiguousarray(a, dtype="<f8").reshape(-1)
    return sum(lib.XXH3_64bits_withSeed(flat[i:i + 1].ctypes.data, 8, i) for i in range(flat.size)) % 2**64

def replace(f, name, values):
    """name rewritten with values (float64), its checksum recomputed, its other attributes kept."""
    attrs = dict(f[name].attrs)
    del f[name]
    f[name] = np.ascontiguousarray(values, dtype="<f8")
    for k, v in attrs.items():
        f[name].attrs[k] = v
    f[name].attrs["xxh3_elemsum"] = np.uint64(elemsum64(values))

def variant(tag, change):
    path = os.path.join(out, "bad-history-%s.h5" % tag)
    shutil.copy(seed, path)
    with h5py.File(path, "r+") as f:
        change(f)

V, S = "state/val_loss_history", "state/run_starts"
variant("valorder", lambda f: replace(f, V, f[V][...][[1, 0, 2, 3]]))          # validations out of order
variant("startcols", lambda f: replace(f, S, f[S][...][:, :12]))              # a column missing
def chain(f):
    s = f[S][...]; s[0, 2] -= 1; replace(f, S, s)                             # job 1 ends before job 2 starts
variant("startchain", chain)
def layout(f):
    s = f[S][...]; s[-1, 7:9] = 2; replace(f, S, s)                           # the newest job on dp=2, not the file's layout
variant("startlayout", layout)
print("wrote", sorted(n for n in os.listdir(out) if "history" in n))
PYEOF
