#!/usr/bin/env bash
# BPE encoding speed (docs/PERFORMANCE.md, "BPE tokenizing"): boost's
# encoder (trainer/data/bpe.h, through build/bench/bpe-speed) beside
# tiktoken's encode_ordinary_batch on the same documents, the same rank file
# and pattern and the same number of threads. The corpus: every Debian
# fortunes file (sorted, .dat/.u8 and links left out) decoded as UTF-8
# (stray bytes as U+FFFD, so both sides read the same text), files joined
# with "\n%\n" and the whole repeated COPIES times; the documents are the
# pieces between "\n%\n" (one fortune each). Each side keeps the fastest of
# REPEAT passes; loading the ranks and reading the text are not timed. Both
# must give the same number of tokens (the byte-exact check is
# tests/cli/bpe_tiktoken.sh). A last column shows tiktoken's core without
# the per-document cost of its batch call (a Python thread pool): the whole
# text in one encode_ordinary call, one thread.
#   THREADS="1 2" PRETOKS="gpt2 cl100k llama3" COPIES=4 REPEAT=3 bash bench/bench_bpe.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BOOST_BINARY_DIR:-$root/build}
PYENV=${BOOST_PYENV:-$root/.cache/pyenv}
GPT2=${BOOST_GPT2_RANKS:-$root/.cache/tokenizers/gpt2.tiktoken}
THREADS=${THREADS:-"1 2"}
PRETOKS=${PRETOKS:-gpt2}
COPIES=${COPIES:-4}
REPEAT=${REPEAT:-3}
CHECK=$root/tests/cli/bpe_tiktoken_check.py
[ -x "$B/bench/bpe-speed" ] || { echo "bench_bpe: $B/bench/bpe-speed is not built" >&2; exit 1; }
[ -s "$GPT2" ] || { echo "bench_bpe: no GPT-2 rank file at $GPT2 (scripts/setup-pyenv.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYENV/bin/python" - "$tmp/corpus.txt" "$COPIES" <<'PY'
import os, sys
d = "/usr/share/games/fortunes"
names = sorted(n for n in os.listdir(d) if not n.endswith((".dat", ".u8")) and not os.path.islink(os.path.join(d, n)))
text = "\n%\n".join(open(os.path.join(d, n), "rb").read().decode("utf-8", "replace") for n in names)
open(sys.argv[1], "w", encoding="utf-8").write("\n%\n".join([text] * int(sys.argv[2])))
PY
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; corpus $(stat -c %s "$tmp/corpus.txt") bytes"
echo "| pre-tokenizer | threads | boost MB/s | tiktoken encode_ordinary_batch MB/s | boost / tiktoken | tokens | tiktoken one encode_ordinary, 1 thread, MB/s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for pre in $PRETOKS; do
  for t in $THREADS; do
    b=$(OMP_NUM_THREADS=$t "$B/bench/bpe-speed" "$GPT2" "$pre" "$t" "$REPEAT" "$tmp/corpus.txt")
    k=$(RAYON_NUM_THREADS=$t "$PYENV/bin/python" - "$GPT2" "$pre" "$t" "$REPEAT" "$tmp/corpus.txt" "$CHECK" <<'PY'
import importlib.util, json, sys, time
import tiktoken
from tiktoken.load import load_tiktoken_bpe
ranks, pre, threads, repeat, path, check = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
spec = importlib.util.spec_from_file_location("check", check)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
mr = load_tiktoken_bpe(ranks)
enc = tiktoken.Encoding(name="b", pat_str=mod.pattern(pre), mergeable_ranks=mr, special_tokens={"<|endoftext|>": max(mr.values()) + 1})
text = open(path, encoding="utf-8").read()
docs = text.split("\n%\n")
best, tokens = 1e30, 0
for _ in range(repeat):
    t0 = time.perf_counter()
    out = enc.encode_ordinary_batch(docs, num_threads=threads)
    best = min(best, time.perf_counter() - t0)
    tokens = sum(len(o) for o in out)
n = len(text.encode())
one = 1e30
for _ in range(repeat):
    t0 = time.perf_counter()
    enc.encode_ordinary(text)
    one = min(one, time.perf_counter() - t0)
print(json.dumps({"bytes": n, "tokens": tokens, "seconds": best, "mb_per_s": n / 1e6 / best, "one_mb_per_s": n / 1e6 / one}))
PY
)
    "$PYENV/bin/python" -c '
import json, sys
b, k = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert b["tokens"] == k["tokens"], "token counts differ: boost %d, tiktoken %d" % (b["tokens"], k["tokens"])
print("| %s | %s | %.1f | %.1f | %.2fx | %d | %.1f |" % (sys.argv[3], sys.argv[4], b["mb_per_s"], k["mb_per_s"], b["mb_per_s"] / k["mb_per_s"], b["tokens"], k["one_mb_per_s"]))
' "$b" "$k" "$pre" "$t"
  done
done
