#!/usr/bin/env bash
# Layers point only down: kernels/ < the trainer's core (trainer/model,
# parallel, data, config, job) < ckpt/ < the training loop (the files at
# trainer/'s top) < tools/. A file includes headers of its own layer or of
# layers below it, never above (docs/LAYOUT.md); and the checkpoint package includes nothing
# of the training side, not even through a header it may include:
# config.h, optim.h, preempt.h, train_state.h, model.h, data.h (it takes its
# settings and a metadata block from the run instead). Headers are named
# without their folder ("tensor.h"), so each name is looked up among the
# tree's headers; system headers (<...>) do not count.
# Generation, evaluation and export run forwards over weights and a run
# state: none of their files reaches the training state's header
# (model_train.h: gradients, AdamW moments), not even through a header.
# And no struct of ckpt/ has more than 20 fields (a part with one job holds
# few things): each ckpt/*.c is preprocessed (X-macro members expanded) and
# the structs whose text comes from ckpt/ are counted, a nested struct or
# union as one field.
#
#   bash tests/cli/layers.sh [SOURCE_DIR]    exit 0 clean, 1 with one line per violation
set -euo pipefail
SRC=${1:-${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}}
/usr/bin/python3 - "$SRC" <<'PY'
import os, re, sys
src = sys.argv[1]
order = ["kernels", "trainer core", "ckpt", "trainer loop", "tools"]
core_parts = {"model", "parallel", "data", "config", "job"}
banned_in_ckpt = {"config.h", "optim.h", "preempt.h", "train_state.h", "model.h", "model_train.h", "data.h"}
# the inference side: the model's forward API, the KV cache, the training
# log's samples, boost-generate, boost-eval, boost-export and the checkpoint
# model they load
inference = ["trainer/model/model.h", "trainer/model/model_decode.h", "trainer/model/model_decode.c",
             "trainer/train_sample.h", "trainer/train_sample.c", "tools/ckpt_model.h", "tools/ckpt_model.c",
             "tools/boost_generate.c", "tools/generate.h", "tools/generate_run.c", "tools/generate_tok.c",
             "tools/boost_eval.c", "tools/eval_choice.h", "tools/eval_choice.c", "tools/eval_data.h",
             "tools/eval_data.c", "tools/eval_loss.h", "tools/eval_loss.c", "tools/boost_export.c", "tools/export.h",
             "tools/export_dir.c", "tools/export_files.c", "tools/export_plan.c", "tools/export_st.c"]
training_state = "model_train.h"
include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

def layer_of(root):  # the layer of a folder of the tree, None outside the layers
    parts = os.path.relpath(root, src).split(os.sep)
    if parts[0] == "trainer":
        if len(parts) == 1:
            return "trainer loop"
        return "trainer core" if parts[1] in core_parts else None
    return parts[0] if parts[0] in order else None

not_layers = {"tests", "bench", "examples", "scripts", "docs", "shared"}
for top in sorted(os.listdir(src)):
    d = os.path.join(src, top)
    if top in ("kernels", "trainer", "ckpt", "tools") or top in not_layers or top.startswith((".", "build")) or not os.path.isdir(d):
        continue
    for root, _, names in os.walk(d):
        stray = [n for n in names if n.endswith((".c", ".h", ".cu", ".cuh"))]
        if stray:
            print(f"FAIL: {os.path.relpath(os.path.join(root, stray[0]), src)} is outside the layers (kernels, trainer, ckpt, tools)")
            sys.exit(1)

home, files = {}, []  # header name -> layer; every source file with its layer
for top in ("kernels", "trainer", "ckpt", "tools"):
    for root, _, names in os.walk(os.path.join(src, top)):
        for n in names:
            if not n.endswith((".c", ".h", ".cu", ".cuh")):
                continue
            path = os.path.join(root, n)
            folder = layer_of(root)
            if folder is None:
                print(f"FAIL: {os.path.relpath(path, src)} is in a folder of no layer (trainer/ holds the loop and {', '.join(sorted(core_parts))}/)")
                sys.exit(1)
            files.append((folder, path))
            if n.endswith((".h", ".cuh")):
                if n in home and home[n] != folder:
                    print(f"FAIL: header name {n} exists in the {home[n]} and the {folder}: includes would be ambiguous")
                    sys.exit(1)
                home[n] = folder
paths = {os.path.basename(p): p for _, p in files if p.endswith((".h", ".cuh"))}

def includes(path):
    with open(path, errors="replace") as f:
        return [m.group(1).split("/")[-1] for m in include.finditer(f.read())]

def closure(path):  # every header of the tree reached from path, with the chain that reaches it
    seen, todo = {}, [(path, [])]
    while todo:
        p, chain = todo.pop()
        for h in includes(p):
            if h in home and h not in seen:
                seen[h] = chain + [h]
                todo.append((paths[h], chain + [h]))
    return seen

bad = []
for folder, path in files:
    rel = os.path.relpath(path, src)
    for h in includes(path):
        if h in home and order.index(home[h]) > order.index(folder):
            bad.append(f"{rel} includes {h} from the {home[h]}, a layer above the {folder}")
    if folder == "ckpt":
        for h, chain in closure(path).items():
            if h in banned_in_ckpt:
                bad.append(f"{rel} includes the training side's {h} (through {' -> '.join(chain)})")
for rel in inference:
    path = os.path.join(src, rel)
    if not os.path.exists(path):
        bad.append(f"{rel} (an inference file this check names) is missing: update tests/cli/layers.sh")
        continue
    chain = closure(path).get(training_state)
    if chain:
        bad.append(f"{rel} reaches the training state's {training_state} (through {' -> '.join(chain)}): "
                   "generation, evaluation and export must not see gradients or moments")
for line in bad:
    print("FAIL:", line)
if bad:
    sys.exit(1)
print(f"ok: {len(inference)} inference files do not reach {training_state}")
print(f"ok: {len(files)} files of {', '.join(order)} include only their own layer or those below; ckpt/ reaches none of {', '.join(sorted(banned_in_ckpt))}")
PY

# No struct of ckpt/ with more than 20 fields.
/usr/bin/python3 - "$SRC" <<'PY'
import os, re, subprocess, sys
src, limit = sys.argv[1], 20
ckpt = os.path.join(src, "ckpt")
flags = ["-D_GNU_SOURCE"] + ["-I" + os.path.join(src, d) for d in ("kernels", "kernels/cpu", "trainer", "trainer/model", "trainer/parallel", "trainer/data", "trainer/config", "trainer/job", "ckpt", "ckpt/remote")]  # ckpt/remote: the remote level (issue 42)
pc = subprocess.run(["pkg-config", "--cflags", "hdf5-openmpi", "libcjson"], capture_output=True, text=True)
if pc.returncode != 0:
    print("FAIL: pkg-config --cflags hdf5-openmpi libcjson:", pc.stderr.strip())
    sys.exit(1)
flags += pc.stdout.split()

def fields(body):  # top-level declarators: nested bodies, parentheses and array bounds folded first
    for pat in (r"\{[^{}]*\}", r"\([^()]*\)"):
        while re.search(pat, body):
            body = re.sub(pat, " ", body)
    body = re.sub(r"\[[^\]]*\]", " ", body)
    return sum(d.count(",") + 1 for d in body.split(";") if d.strip())

counts = {}  # (file, struct) -> fields
for n in sorted(os.listdir(ckpt)) + ["remote/" + r for r in sorted(os.listdir(os.path.join(ckpt, "remote")))]:  # remote: issue 42
    if not n.endswith(".c"):
        continue
    pp = subprocess.run(["cc", "-E", *flags, os.path.join(ckpt, n)], capture_output=True, text=True)
    if pp.returncode != 0:
        print(f"FAIL: cc -E ckpt/{n}: {(pp.stderr.strip().splitlines() or ['?'])[0]}")
        sys.exit(1)
    text, origin, cur = [], [], ""
    for line in pp.stdout.splitlines():  # keep what ckpt/ files wrote, with the file
        m = re.match(r'^# \d+ "([^"]+)"', line)
        if m:
            cur = os.path.abspath(m.group(1))
        elif os.path.dirname(cur) in (os.path.abspath(ckpt), os.path.join(os.path.abspath(ckpt), "remote")):
            text.append(line)
            origin.append(os.path.basename(cur))
    s = "\n".join(text)
    for m in re.finditer(r"\bstruct\s*(\w*)\s*\{", s):
        i = j = m.end()
        depth = 1
        while depth:
            depth += {"{": 1, "}": -1}.get(s[j], 0)
            j += 1
        name = m.group(1) or (re.match(r"\s*(\w+)", s[j:]) or [None, "(anonymous)"])[1]
        counts[(origin[s.count("\n", 0, m.start())], name)] = fields(s[i:j - 1])
if len(counts) < 20:
    print(f"FAIL: only {len(counts)} structs found in ckpt/: the scan is broken")
    sys.exit(1)
bad = [(f, n, k) for (f, n), k in sorted(counts.items()) if k > limit]
for f, n, k in bad:
    print(f"FAIL: struct {n} (ckpt/{f}) has {k} fields, more than {limit}: split it into parts with one job each")
if bad:
    sys.exit(1)
top = max(counts.items(), key=lambda x: x[1])
print(f"ok: {len(counts)} structs of ckpt/, none with more than {limit} fields (the most: {top[0][1]}, {top[1]})")
PY
