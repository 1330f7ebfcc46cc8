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
# The folders inside ckpt/ and tools/ belong to their top's layer.
# Generation, evaluation and export run forwards over weights and an
# activation state: none of their files reaches the training state's header
# (model_train.h: gradients, AdamW moments), not even through a header.
# No struct of ckpt/ or trainer/ has more than 20 fields (a part with one job
# holds few things): each .c is preprocessed (X-macro members expanded) and
# the structs whose text comes from that tree are counted, a nested struct
# or union as one field.
# Library code (kernels/, trainer/ but boost_train.c, ckpt/,
# tools/ckpt_reader/) keeps each file to 500 lines, never prints (but
# kernels/log.c and the HDF5 plugin's one line), and a lower layer's header declares no function pointer
# but the ones allowed below, each with its reason (the last block).
# Every violation is one line "FAIL: <file>[:<line>]: <what> (rule: ...)";
# tests/cli/layers_rules.sh plants one of each in a copy of the tree.
#
#   bash tests/cli/layers.sh [SOURCE_DIR]    exit 0 clean, 1 with one line per violation
set -euo pipefail
SRC=${1:-${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}}
rc=0
/usr/bin/python3 - "$SRC" <<'PY' || rc=1
import os, re, sys
src = sys.argv[1]
order = ["kernels", "trainer core", "ckpt", "trainer loop", "tools"]
core_parts = {"model", "parallel", "data", "config", "job"}
banned_in_ckpt = {"config.h", "optim.h", "preempt.h", "train_state.h", "model.h", "model_train.h", "data.h"}
# the inference side: the model's forward API, the KV cache, the training
# log's samples, boost-generate, boost-eval, boost-export and the checkpoint
# model they load
inference = ["trainer/model/model.h", "trainer/model/model_decode.h", "trainer/model/model_decode.c",
             "trainer/train_sample.h", "trainer/train_sample.c", "tools/ckpt_reader/ckpt_model.h",
             "tools/ckpt_reader/ckpt_model.c", "tools/generate/boost_generate.c", "tools/generate/generate.h",
             "tools/generate/generate_run.c", "tools/generate/generate_tok.c", "tools/eval/boost_eval.c",
             "tools/eval/eval_choice.h", "tools/eval/eval_choice.c", "tools/eval/eval_data.h", "tools/eval/eval_data.c",
             "tools/eval/eval_loss.h", "tools/eval/eval_loss.c", "tools/export/boost_export.c", "tools/export/export.h",
             "tools/export/export_dir.c", "tools/export/export_files.c", "tools/export/export_plan.c",
             "tools/export/export_st.c"]
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

# No struct of ckpt/ or trainer/ with more than 20 fields.
/usr/bin/python3 - "$SRC" <<'PY' || rc=1
import os, re, subprocess, sys
src, limit = sys.argv[1], 20
trees = ("ckpt", "trainer")
dirs = {t: sorted(root for root, _, _ in os.walk(os.path.join(src, t))) for t in trees}
flags = ["-D_GNU_SOURCE", "-DBOOST_VERSION=\"0\""] + ["-I" + os.path.join(src, d) for d in ("kernels", "kernels/cpu", "kernels/cuda")] + ["-I" + d for t in trees for d in dirs[t]]
pc = subprocess.run(["pkg-config", "--cflags", "hdf5-openmpi", "libcjson", "inih", "libpcre2-8"], capture_output=True, text=True)
if pc.returncode != 0:
    print("FAIL: pkg-config --cflags hdf5-openmpi libcjson inih libpcre2-8:", pc.stderr.strip())
    sys.exit(1)
flags += pc.stdout.split()

def fields(body):  # top-level declarators: nested bodies, parentheses and array bounds folded first
    for pat in (r"\{[^{}]*\}", r"\([^()]*\)"):
        while re.search(pat, body):
            body = re.sub(pat, " ", body)
    body = re.sub(r"\[[^\]]*\]", " ", body)
    return sum(d.count(",") + 1 for d in body.split(";") if d.strip())

counts, bad = {}, []  # (file, struct) -> fields
for tree in trees:
    root_abs = os.path.abspath(os.path.join(src, tree))
    found = 0
    for n in sorted(os.path.relpath(os.path.join(r, f), src) for r in dirs[tree] for f in os.listdir(r)):
        if not n.endswith(".c"):
            continue
        pp = subprocess.run(["cc", "-E", *flags, os.path.join(src, n)], capture_output=True, text=True)
        if pp.returncode != 0:
            if re.search(r"\b(nccl|cuda_runtime|cuda)\.h\b", pp.stderr):  # the NCCL backend: built only with CUDA and NCCL
                continue
            print(f"FAIL: cc -E {n}: {(pp.stderr.strip().splitlines() or ['?'])[0]}")
            sys.exit(1)
        text, origin, cur = [], [], ""
        for line in pp.stdout.splitlines():  # keep what the tree's files wrote, with the file
            m = re.match(r'^# \d+ "([^"]+)"', line)
            if m:
                cur = os.path.abspath(m.group(1))
            elif cur.startswith(root_abs + os.sep):
                text.append(line)
                origin.append(os.path.relpath(cur, os.path.abspath(src)))
        s = "\n".join(text)
        for m in re.finditer(r"\bstruct\s*(\w*)\s*\{", s):
            i = j = m.end()
            depth = 1
            while depth:
                depth += {"{": 1, "}": -1}.get(s[j], 0)
                j += 1
            name = m.group(1) or (re.match(r"\s*(\w+)", s[j:]) or [None, "(anonymous)"])[1]
            counts[(origin[s.count("\n", 0, m.start())], name)] = fields(s[i:j - 1])
            found += 1
    if found < 20:
        print(f"FAIL: only {found} structs found in {tree}/: the scan is broken")
        sys.exit(1)
bad = [(f, n, k) for (f, n), k in sorted(counts.items()) if k > limit]
for f, n, k in bad:
    print(f"FAIL: {f}: struct {n} has {k} fields, more than {limit} (rule: a struct of ckpt/ or trainer/ holds at most {limit}; split it into parts with one job each)")
if bad:
    sys.exit(1)
top = max(counts.items(), key=lambda x: x[1])
print(f"ok: {len(counts)} structs of ckpt/ and trainer/, none with more than {limit} fields (the most: {top[0][1]} in {top[0][0]}, {top[1]})")
PY

# Library code: kernels/, trainer/ but its program boost_train.c, ckpt/ and
# the tools' shared checkpoint reader (tools/ckpt_reader/). Each of its
# files stays at most 500 lines (a file with one job fits); none prints
# (kernels/log.c is the one voice: library code returns what happened, or
# says it through log.h; the HDF5 plugin speaks for itself in a foreign
# process); and no header of a lower layer (kernels/, the
# trainer's core, ckpt/) declares a function pointer, as a type, a member or
# a parameter, but those allowed below with the reason each must stay: a
# pointer a higher layer fills makes the lower one call back up.
/usr/bin/python3 - "$SRC" <<'PY' || rc=1
import os, re, sys
src, max_lines = sys.argv[1], 500
programs = {"trainer/boost_train.c"}
# the voices: kernels/log.c for every program of ours; the HDF5 zstd plugin
# for the foreign process that loads it (h5dump, h5py): no program of ours
# prints for it there, and it links no libhdf5 whose error stack it could use
voice = {"kernels/log.c", "ckpt/format/h5/h5z_zstd_plugin.c"}
# (header, declared name): why it stays
allowed_fn = {
    **{("kernels/backend.h", n): "the backend seam: each backend fills its memory operations, the model and optimizer call down"
       for n in ("alloc", "free", "host_alloc", "host_free", "zero", "copy", "copy2d", "upload", "download", "mark",
                 "download_async", "copy_sync", "sync", "host_view", "destroy")},
    **{("kernels/device_wait.h", n): "device_wait's hooks: a device wait happens inside a backend op, and only the comm layer above "
       "knows the watchdog's record, NCCL's asynchronous errors and the failure path"
       for n in ("boost_ready_fn", "begin", "end", "poll", "fail")},
    ("kernels/job_abort.h", "fn"): "job_abort's end hooks: the one end of a job must abort NCCL (the comm layer's) before MPI_Abort",
    ("trainer/config/config.h", "want"): "config_diff's filter: called during the call, never kept",
    ("trainer/model/model_train.h", "model_grads_ready_fn"): "the backward posts each finished range to the dp reduction "
       "(grad_buckets, in the same core): the overlap of the reduction with the backward",
    ("trainer/parallel/grad_buckets.h", "grad_buckets_local_fn"): "the view of the rank's own gradients between the backward "
       "and their reduction, inside the buckets' schedule (the guard's replay hashes them there)",
    **{("trainer/parallel/comm.h", n): "the comm backend's ops: MPI or NCCL behind one front"
       for n in ("allreduce", "allreduce_pair", "reduce_scatter", "allgather_chunks", "allgather", "alltoallv", "isend",
                 "recv", "wait", "iallreduce", "ireduce_scatter", "test", "poll", "abort", "destroy")},
    ("trainer/parallel/watchdog.h", "watchdog_overdue_fn"): "the watchdog asks a job of another thread (the checkpoint "
       "writer's) whether it is overdue at the moment it looks: a deadline cannot be told in advance",
    ("trainer/parallel/watchdog.h", "watchdog_status_fn"): "the exit status the watchdog ends a job with depends on what "
       "was committed by then, which only the loop knows",
    ("ckpt/session/ckpt_worker.h", "ckpt_job_fn"): "the session gives its own writer thread the job to do: filled inside ckpt/",
    **{("ckpt/write/ckpt_write_path.h", n): "the two write paths behind one interface, both inside ckpt/"
       for n in ("prepare", "create", "dataset", "skip", "go_on", "finish")},
    **{("ckpt/remote/s3_multipart.h", n): "an S3 listing's visitor, called page by page so a listing of any length "
       "needs no array: filled only inside ckpt/remote/" for n in ("s3_object_fn", "s3_upload_fn")},
}
# HDF5's filter and file-driver callbacks (ckpt/format/h5/h5z_zstd.c, ckpt_vfd.c) are
# filled in .c files, in the structs HDF5 defines: no header of ours declares them.

def library(rel):
    top = rel.split("/")[0]
    if rel in programs:
        return False
    return top in ("kernels", "trainer", "ckpt") or rel.startswith("tools/ckpt_reader/")

def lower_header(rel):  # kernels/, the trainer's core, ckpt/
    parts = rel.split("/")
    return rel.endswith((".h", ".cuh")) and (parts[0] in ("kernels", "ckpt") or (parts[0] == "trainer" and len(parts) > 2))

def code_only(text):  # comments and string literals blanked, lines kept
    out = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                 lambda m: "".join(c if c == "\n" else " " for c in m.group(0)) if not m.group(0).startswith('"') else '""', text, flags=re.S)
    return out

prints = re.compile(r'(?<![\w.>])(printf|puts|perror|vprintf)\s*\(|\b(fprintf|vfprintf)\s*\(\s*(stderr|stdout)\b|'
                    r'\b(fputs|fputc)\s*\([^;]*,\s*(stderr|stdout)\s*\)')
fnptr = re.compile(r'\(\s*\*\s*(\w+)\s*\)\s*\(')
fntype = re.compile(r'\btypedef\s+[^;{}()]*?\b(\w+)\s*\([^;{}]*\)\s*;')
bad, nlib, nhdr = [], 0, 0
for top in ("kernels", "trainer", "ckpt", "tools/ckpt_reader"):
    for root, _, names in os.walk(os.path.join(src, top)):
        for n in sorted(names):
            if not n.endswith((".c", ".h", ".cu", ".cuh")):
                continue
            path = os.path.join(root, n)
            rel = os.path.relpath(path, src)
            if not library(rel):
                continue
            nlib += 1
            with open(path, errors="replace") as f:
                text = f.read()
            lines = text.count("\n") + (not text.endswith("\n") and text != "")
            if lines > max_lines:
                bad.append(f"{rel}: {lines} lines (rule: a library file holds at most {max_lines}; split it by job)")
            code = code_only(text)
            if rel not in voice:
                for m in prints.finditer(code):
                    ln = code.count("\n", 0, m.start()) + 1
                    bad.append(f"{rel}:{ln}: prints ({m.group(0).strip()}...) (rule: library code never prints; "
                               "return what happened, or say it through kernels/log.h)")
            if lower_header(rel):
                nhdr += 1
                seen = set()
                for m in list(fnptr.finditer(code)) + list(fntype.finditer(code)):
                    name = m.group(1)
                    if m.re is fntype and "(*" in m.group(0).replace(" ", ""):
                        continue  # a pointer typedef: fnptr names it
                    if (rel, name) in allowed_fn or (rel, name) in seen:
                        continue
                    seen.add((rel, name))
                    ln = code.count("\n", 0, m.start()) + 1
                    bad.append(f"{rel}:{ln}: function pointer {name} in a lower layer's header (rule: no callback a "
                               "higher layer fills; tests/cli/layers.sh lists the allowed ones with their reasons)")
for line in bad:
    print("FAIL:", line)
if bad:
    sys.exit(1)
print(f"ok: {nlib} library files of at most {max_lines} lines, none printing but kernels/log.c (and the HDF5 plugin, for the foreign process that loads it); "
      f"{nhdr} lower-layer headers declare only the {len(allowed_fn)} allowed function pointers")
PY
exit $rc
