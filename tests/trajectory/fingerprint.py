"""Prints the fingerprint of a training run: every step's loss and gradient
norm (exact, as float.hex) from a metrics JSON-lines file, and a SHA-256 of
the raw little-endian values of every dataset of a checkpoint (weights and
AdamW moments, as global logical tensors).

  /usr/bin/python3 fingerprint.py METRICS.jsonl CHECKPOINT.h5

Reads the checkpoint with h5py (HDF5_PLUGIN_PATH must name boost's zstd
filter plugin), so the fingerprint depends only on the file format, not on
boost's own reader."""
import hashlib
import json
import sys

import h5py
import numpy as np

metrics, ckpt = sys.argv[1], sys.argv[2]
with open(metrics) as f:
    for line in f:
        rec = json.loads(line)
        if "loss" in rec and "step" in rec:
            print("step %d loss %s gnorm %s" % (rec["step"], float(rec["loss"]).hex(),
                                               float(rec["grad_norm"]).hex()))

rows = []


def visit(name, obj):
    if isinstance(obj, h5py.Dataset) and (name.startswith("model/") or name.startswith("optim/")):
        a = np.ascontiguousarray(obj[()])
        rows.append("tensor %s %s %s %s" % (name, a.dtype.str, "x".join(map(str, a.shape)),
                                            hashlib.sha256(a.astype(a.dtype.newbyteorder("<")).tobytes()).hexdigest()))


with h5py.File(ckpt, "r") as f:
    f.visititems(visit)
print("\n".join(sorted(rows)))
