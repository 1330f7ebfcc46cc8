#!/usr/bin/env bash
# Writes the bf16 fuzz seeds of boost-inspect (docs/INSPECT.md, "Fuzzing"):
#   tests/fuzz/seeds/tiny-bf16-all.h5   a real train.precision=bf16 checkpoint
#                                       with ckpt.activations=all (bfloat16
#                                       activations); it must verify
#   tests/fuzz/seeds/bad-bf16-*.h5      the same file with one thing wrong
#                                       about its bf16 data (below); verify
#                                       must refuse each, naming it
# tests/cli/inspect_fuzz_corpus.sh checks both. Run from anywhere:
#   bash tests/fuzz/make_bf16_seeds.sh [BUILD_DIR]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:-$src/build}
out=$src/tests/fuzz/seeds
PY=/usr/bin/python3 # Debian's h5py and numpy belong to this interpreter
export HDF5_PLUGIN_PATH=$B/hdf5-plugins OMP_NUM_THREADS=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_bf16_seeds.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$B/tools/boost-data" -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null
# The model of the other seeds (one tiny layer), in bf16, every activation.
"$B/trainer/boost-train" --set data.train="$tmp/f.tok" --set model.preset=tiny --set model.vocab=257 --set model.d_model=16 \
  --set model.n_layers=1 --set model.n_heads=2 --set model.ffn=32 --set model.seq_len=16 --set model.rank_attn=4 \
  --set model.rank_mlp=4 --set train.batch_size=1 --set train.steps=2 --set train.val_batches=0 --set train.threads=1 \
  --set train.precision=bf16 --set ckpt.dir="$tmp/c" --set ckpt.activations=all --set ckpt.level=3 >"$tmp/t.log" 2>&1 ||
  { tail -3 "$tmp/t.log"; exit 1; }
cp "$tmp/c/step_00000002.h5" "$out/tiny-bf16-all.h5"
"$B/tools/boost-inspect" verify "$out/tiny-bf16-all.h5" >/dev/null
"$PY" - "$out" <<'PYEOF'
import os, shutil, sys
import h5py, numpy as np
out = sys.argv[1]
seed = os.path.join(out, "tiny-bf16-all.h5")
H = "activations/layers.0.attn.qkv.h"

def bf16_type():
    t = h5py.h5t.IEEE_F32LE.copy()
    t.set_fields(15, 7, 8, 0, 7); t.set_offset(0); t.set_precision(16); t.set_size(2); t.set_ebias(127)
    return t

def replace(f, name, values, ftype):
    """name rewritten (unfiltered) with values in file type ftype, its checksum attribute kept."""
    attrs = dict(f[name].attrs)
    del f[name]
    space = h5py.h5s.create_simple(values.shape)
    d = h5py.h5d.create(f.id, name.encode(), ftype, space)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(values))
    for k, v in attrs.items():
        f[name].attrs[k] = v

def variant(tag, change):
    path = os.path.join(out, "bad-bf16-%s.h5" % tag)
    shutil.copy(seed, path)
    with h5py.File(path, "r+") as f:
        change(f)

# one row too many: a bf16 dataset of the wrong size
variant("size", lambda f: replace(f, H, np.concatenate([f[H][...], f[H][:1]]).astype(np.float32), bf16_type()))
# IEEE half precision where bfloat16 belongs: the wrong 16-bit float
variant("half", lambda f: replace(f, H, f[H][...].astype(np.float16), h5py.h5t.IEEE_F16LE))
# the raw bfloat16 bits as 16-bit integers (a convention this format does not use)
variant("uint16", lambda f: replace(f, H, (f[H][...].astype(np.float32).view(np.uint32) >> 16).astype(np.uint16),
                                    h5py.h5t.STD_U16LE))
# float32 where a bf16 run stores bfloat16
variant("f32", lambda f: replace(f, H, f[H][...].astype(np.float32), h5py.h5t.IEEE_F32LE))
def attr(value):
    def change(f):
        del f.attrs["precision"]
        f.attrs["precision"] = value
    return change
variant("attr-value", attr(np.bytes_(b"bf17")))      # a precision the format does not know
variant("attr-type", attr(np.int64(16)))             # the attribute of the wrong type
variant("attr-fp32", attr(np.bytes_(b"fp32")))       # says fp32 over bfloat16 activations
print("wrote", sorted(n for n in os.listdir(out) if "bf16" in n))
PYEOF
