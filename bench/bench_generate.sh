#!/usr/bin/env bash
# Generation speed (docs/PERFORMANCE.md, "Generation"): boost-generate's
# tokens/s on cola-60m and llama-60m (random init plus one training step;
# model.seq_len raised to 512 so 256 new tokens fit), batch 1, greedy,
# 256 new tokens after one prompt token, 1 and 2 threads, fp32 and bf16,
# beside transformers' LlamaForCausalLM at llama-60m's shape on the same
# CPU in the same run (the peer has no CoLA model: CoLA is not in
# transformers), and the share of the memory-bandwidth limit: the working
# weights a decode step reads (boost-generate --json's
# weight_bytes_per_token) times tokens/s over the read bandwidth measured
# here on the same bytes in the same pattern. Per row, a buffer of exactly
# those bytes is read again and again by three probes at the same thread
# count: torch.mv and torch.sum over it as an fp32 matrix of 512 columns (a
# model's rows), and bench/read_bw.c (a plain sum in address order with the
# lines 32 KB ahead prefetched: the decode loops' access without their
# arithmetic; the wheel's torch.mv and torch.sum read 13-14 GB/s on one
# Zen 4 core where boost's fp32 decode streamed 23). Each probe keeps its
# fastest pass over a second after 3 unmeasured ones; the probes run before
# and after boost's generations, and at 2 threads also at 1 thread (a busy
# machine slows a two-thread team far more than one thread, and two
# threads can always read what one does); the highest is the limit. Every
# generation, boost's and the peer's, runs twice and the faster counts
# (this VM's speed drifts). A decode step streams its weights once per
# token, so the part of them the last-level cache keeps between tokens it
# keeps between the probes' passes too; the fixed 512 MiB probe this bench
# used before missed that share and put cola-60m, whose weights half fit a
# 32 MiB cache, above 100 %.
#
# THREADS means cores for both sides. torch.set_num_threads does not reach
# the BLAS under Debian's torch (OpenBLAS's pthread build, its own pool of
# one thread per core): at set_num_threads(1) its fp32 GEMVs ran on two
# threads. So the peer and the probe run with OPENBLAS_NUM_THREADS (and
# OMP/MKL_NUM_THREADS) set to the thread count, and the table reports the
# peer's busy threads (those with at least a tenth of the busiest one's CPU
# time while it generated); boost-generate --threads 1 runs one thread.
#
#   bench/bench_generate.sh [WORKDIR]
# BOOST_BINARY_DIR: the build (default ./build); BOOST_PEER_PYTHON: a Python
# with torch and transformers (default: the peer users install, PyPI's torch
# wheel and transformers in /opt/boost-peer, made by bench/install_peer.sh;
# python3 when that is absent). Runs under
# flock /tmp/boost-bench.lock; the checkpoints (~600 MB) stay in WORKDIR
# (default: a temporary directory, removed at the end).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BOOST_BINARY_DIR:-$root/build}
PEER_DEFAULT=python3
[ -x /opt/boost-peer/bin/python ] && PEER_DEFAULT=/opt/boost-peer/bin/python
PY=${BOOST_PEER_PYTHON:-$PEER_DEFAULT}
NEW=${BENCH_NEW_TOKENS:-256}
work=${1:-}
if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/bench_generate.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
"$PY" -c 'import torch, transformers' 2>/dev/null ||
  { echo "bench_generate: $PY has no torch and transformers (bash bench/install_peer.sh, or set BOOST_PEER_PYTHON)" >&2; exit 1; }
[ -x "$B/bench/read-bw" ] || { echo "bench_generate: $B/bench/read-bw not built" >&2; exit 1; }
[ -f "$work/f.tok" ] || "$B/tools/boost-data" -o "$work/f.tok" /usr/share/games/fortunes >/dev/null
for m in cola-60m llama-60m; do
  [ -e "$work/$m/latest" ] && continue
  OMP_NUM_THREADS=1 "$B/trainer/boost-train" --set data.train="$work/f.tok" --set model.preset=$m --set model.seq_len=512 \
    --set train.val_batches=0 --set train.steps=1 --set train.batch_size=1 --set train.threads=1 \
    --set ckpt.dir="$work/$m" >"$work/$m.log" 2>&1 || { tail -3 "$work/$m.log" >&2; exit 1; }
done

limit() { # limit THREADS CMD...: CMD with its BLAS and OpenMP pools at THREADS
  local t=$1; shift
  OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t "$@"
}

peer() { # peer THREADS DTYPE: transformers' tokens/s at llama-60m's shape, and its busy threads
  limit "$1" "$PY" - "$1" "$2" "$NEW" <<'PY'
import os, sys, time, torch, transformers
threads, dtype, new = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(0)
cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=8,
                               num_attention_heads=8, max_position_embeddings=512, tie_word_embeddings=False)
model = transformers.LlamaForCausalLM(cfg).eval()
if dtype == "bf16": model = model.to(torch.bfloat16)
ids = torch.tensor([[0]])
kw = dict(do_sample=False, use_cache=True, pad_token_id=0, eos_token_id=None)
def cpu_ticks():  # per thread of this process: user + system clock ticks
    out = {}
    for t in os.listdir("/proc/self/task"):
        f = open("/proc/self/task/%s/stat" % t).read().rsplit(")", 1)[1].split()
        out[t] = int(f[11]) + int(f[12])
    return out
with torch.no_grad():
    model.generate(ids, max_new_tokens=8, min_new_tokens=8, **kw)
    before = cpu_ticks()
    t = time.perf_counter()
    out = model.generate(ids, max_new_tokens=new, min_new_tokens=new, **kw)
    dt = time.perf_counter() - t
    used = [v - before.get(k, 0) for k, v in cpu_ticks().items()]
assert out.shape[1] == 1 + new
print("%.2f %d" % (new / dt, sum(u > 0 and u >= max(used) / 10 for u in used)))
PY
}

bandwidth() { # bandwidth THREADS BYTES: read GB/s over BYTES of weights, read again and again (see the top), by torch and by read-bw
  limit "$1" "$PY" - "$1" "$2" <<'PY'
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
cols = 512
w = torch.ones(max(1, int(sys.argv[2]) // (4 * cols)), cols)
x = torch.ones(cols)
best = 0.0
for op in (lambda: torch.mv(w, x), lambda: torch.sum(w)):
    for _ in range(3): op()
    end = time.perf_counter() + 1.0
    while time.perf_counter() < end:
        t = time.perf_counter(); op(); best = max(best, w.numel() * 4 / (time.perf_counter() - t))
print("%.2f" % (best / 1e9))
PY
  "$B/bench/read-bw" --bytes "$2" --threads "$1"
}

ours() { # ours MODEL THREADS PREC: tokens/s and bytes per token
  "$B/tools/boost-generate" --json --tokens 0 --max-new-tokens "$NEW" --temperature 0 --threads "$2" --precision "$3" \
    "$work/$1" 2>/dev/null | "$PY" -c 'import json,sys; o=json.load(sys.stdin); assert len(o["tokens"]) == int(sys.argv[1]), o["stop"]
print("%.2f %d" % (o["tokens_per_s"], o["weight_bytes_per_token"]))' "$NEW"
}

run_all() {
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $NEW new tokens, batch 1, greedy; peer: $("$PY" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
  printf "%-8s %-5s %10s %8s %10s %10s %8s %8s %9s %9s\n" threads prec "peer tok/s" "peer thr" "cola tok/s" "llama tok/s" "cola/pe" "llama/pe" "cola bw%" "llama bw%"
  for t in 1 2; do
    for p in fp32 bf16; do
      read -r pe pt <<<"$(peer $t $p)"
      read -r c cb <<<"$(ours cola-60m $t $p)"
      read -r l lb <<<"$(ours llama-60m $t $p)"
      # probes before and after the generations, and at 1 thread too where t > 1: the highest is the limit
      cbw=$( (bandwidth $t "$cb"; [ "$t" -gt 1 ] && bandwidth 1 "$cb"; true) | sort -g | tail -1)
      lbw=$( (bandwidth $t "$lb"; [ "$t" -gt 1 ] && bandwidth 1 "$lb"; true) | sort -g | tail -1)
      read -r c2 _ <<<"$(ours cola-60m $t $p)"
      read -r l2 _ <<<"$(ours llama-60m $t $p)"
      read -r pe2 _ <<<"$(peer $t $p)"
      c=$("$PY" -c "print(max($c, $c2))"); l=$("$PY" -c "print(max($l, $l2))"); pe=$("$PY" -c "print(max($pe, $pe2))")
      cbw=$( (echo "$cbw"; bandwidth $t "$cb") | sort -g | tail -1)
      lbw=$( (echo "$lbw"; bandwidth $t "$lb") | sort -g | tail -1)
      "$PY" - "$t" "$p" "$pt" "$pe" "$c" "$l" "$cb" "$lb" "$cbw" "$lbw" <<'PY'
import sys
t, p, pt = sys.argv[1:4]
pe, c, l, cb, lb, cbw, lbw = map(float, sys.argv[4:])
print("%-8s %-5s %10.1f %8s %10.1f %10.1f %7.2fx %7.2fx %8.0f%% %8.0f%%   (limits %.1f / %.1f GB/s over %.0f / %.0f MB)"
      % (t, p, pe, pt, c, l, c / pe, l / pe, 100 * c * cb / (cbw * 1e9), 100 * l * lb / (lbw * 1e9), cbw, lbw,
         cb / 1e6, lb / 1e6))
PY
    done
  done
}

export B PY NEW work
flock /tmp/boost-bench.lock bash -c "set -euo pipefail; $(declare -f run_all limit peer bandwidth ours); run_all"
