#!/usr/bin/env bash
# boost-generate (docs/GENERATE.md): cached and uncached greedy decoding
# give the same tokens (tiny cola and llama, fp32 and bf16, the guarded
# backend equal to the CPU's); the same seed gives the same text; the
# checkpoints of tp=2, pp=2 and dp=2 runs generate what the same weights
# resharded to one process generate; a GPT-2 tokenizer file decodes and its
# end-of-text stops generation; bad input gets one line and a non-zero exit.
set -euo pipefail
source "$BOOST_SOURCE_DIR/tests/mpi/ckpt_common.bash"
GEN=$B/tools/boost-generate
RESHARD=$B/tools/boost-reshard
[ -x "$GEN" ] || fail "$GEN not built"
make_data

# json FILE KEY: a key of boost-generate's JSON object, printed as JSON.
json() { "$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))[sys.argv[2]]))' "$1" "$2"; }
# gen OUT args...: boost-generate --json into OUT (stderr into OUT.err).
gen() {
  local out=$1
  shift
  "$GEN" --json "$@" >"$out" 2>"$out.err" || fail "boost-generate $*: $(cat "$out.err")"
}

for preset in tiny llama-tiny; do
  # Two steps: close to the random init, so the greedy tokens vary with the context.
  train 0 "$tmp/$preset.log" --set model.preset=$preset --set train.steps=2 \
    --set ckpt.dir="$tmp/$preset" || fail "train $preset: $(tail -3 "$tmp/$preset.log")"
  for prec in fp32 bf16; do
    gen "$tmp/c.json" --prompt "Fortune favours" --max-new-tokens 24 --temperature 0 --precision $prec "$tmp/$preset"
    gen "$tmp/u.json" --prompt "Fortune favours" --max-new-tokens 24 --temperature 0 --precision $prec --no-cache \
      "$tmp/$preset"
    [ "$(json "$tmp/c.json" tokens)" = "$(json "$tmp/u.json" tokens)" ] ||
      fail "$preset $prec: cached tokens $(json "$tmp/c.json" tokens) != uncached $(json "$tmp/u.json" tokens)"
    [ "$(json "$tmp/c.json" cache)" = true ] && [ "$(json "$tmp/u.json" cache)" = false ] || fail "cache flag"
    gen "$tmp/g.json" --prompt "Fortune favours" --max-new-tokens 24 --temperature 0 --precision $prec \
      --device guarded "$tmp/$preset"
    [ "$(json "$tmp/c.json" tokens)" = "$(json "$tmp/g.json" tokens)" ] || fail "$preset $prec: guarded differs"
    echo "$preset $prec: cached = uncached = guarded: $(json "$tmp/c.json" text)"
  done
  # The same seed, the same text; sampling actually samples (another seed differs).
  gen "$tmp/s1.json" --tokens 256,70 --max-new-tokens 40 --temperature 1.5 --top-k 50 --top-p 0.95 --seed 7 "$tmp/$preset"
  gen "$tmp/s2.json" --tokens 256,70 --max-new-tokens 40 --temperature 1.5 --top-k 50 --top-p 0.95 --seed 7 "$tmp/$preset"
  gen "$tmp/s3.json" --tokens 256,70 --max-new-tokens 40 --temperature 1.5 --top-k 50 --top-p 0.95 --seed 8 "$tmp/$preset"
  [ "$(json "$tmp/s1.json" tokens)" = "$(json "$tmp/s2.json" tokens)" ] || fail "$preset: seed 7 twice differs"
  [ "$(json "$tmp/s1.json" tokens)" != "$(json "$tmp/s3.json" tokens)" ] || fail "$preset: seeds 7 and 8 agree"
  [ "$(json "$tmp/s1.json" prompt_tokens)" = "[256, 70]" ] || fail "prompt_tokens $(json "$tmp/s1.json" prompt_tokens)"
done

# Streaming: the text on stdout is the JSON's text; tokens/s on stderr.
"$GEN" --prompt "Fortune favours" --max-new-tokens 24 --temperature 0 "$tmp/tiny" >"$tmp/stream.txt" 2>"$tmp/stream.err"
gen "$tmp/c.json" --prompt "Fortune favours" --max-new-tokens 24 --temperature 0 "$tmp/tiny"
"$PY" - "$tmp/stream.txt" "$tmp/c.json" <<'PY' || fail "streamed text differs from the JSON's"
import json, sys
streamed = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
assert streamed == json.load(open(sys.argv[2]))["text"] + "\n", (streamed, json.load(open(sys.argv[2]))["text"])
PY
grep -q "tokens/s" "$tmp/stream.err" || fail "no tokens/s on stderr: $(cat "$tmp/stream.err")"

# Layouts: a checkpoint written by tp=2, pp=2 or dp=2 generates what its
# weights resharded onto one process generate, and what the guarded backend does.
for layout in "tp=2" "pp=2" "dp=2"; do
  key=${layout%=*}
  train 2 "$tmp/$key.log" --set parallel.$key=2 --set train.steps=4 --set ckpt.dir="$tmp/$key" ||
    fail "train $layout: $(tail -3 "$tmp/$key.log")"
  "$RESHARD" "$tmp/$key" "$tmp/$key.one.h5" --layout dp=1,tp=1,pp=1 --quiet >"$tmp/r.log" 2>&1 ||
    fail "reshard $layout: $(cat "$tmp/r.log")"
  gen "$tmp/a.json" --prompt "Q: " --max-new-tokens 20 --temperature 0.8 --seed 3 "$tmp/$key"
  gen "$tmp/b.json" --prompt "Q: " --max-new-tokens 20 --temperature 0.8 --seed 3 "$tmp/$key.one.h5"
  [ "$(json "$tmp/a.json" tokens)" = "$(json "$tmp/b.json" tokens)" ] || fail "$layout: differs from one process"
  echo "$layout: $(json "$tmp/a.json" tokens)"
done
# A bf16 export generates: at the precision of the run that wrote it
# (auto), or at either one asked for.
"$RESHARD" "$tmp/tiny" "$tmp/tiny.bf16.h5" --layout dp=1,tp=1,pp=1 --bf16 --quiet >"$tmp/r.log" 2>&1 ||
  fail "reshard --bf16: $(cat "$tmp/r.log")"
gen "$tmp/e.json" --prompt "Q: " --max-new-tokens 8 --temperature 0 "$tmp/tiny.bf16.h5"
[ "$(json "$tmp/e.json" precision)" = '"fp32"' ] || fail "a bf16 export of an fp32 run runs at $(json "$tmp/e.json" precision)"
gen "$tmp/e2.json" --prompt "Q: " --max-new-tokens 8 --temperature 0 --precision bf16 "$tmp/tiny.bf16.h5"
[ "$(json "$tmp/e2.json" precision)" = '"bf16"' ] || fail "--precision bf16 runs at $(json "$tmp/e2.json" precision)"

# A GPT-2 tokenizer file (llm.c's format, version 2): pieces decode, its
# end-of-text stops generation before it is emitted.
mktok() { # mktok FILE EOT [N]
  "$PY" - "$1" "$2" "${3:-320}" <<'PY'
import struct, sys
n = int(sys.argv[3])
h = [20240328, 2, n, int(sys.argv[2])] + [0] * 252
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256I", *h))
    for i in range(n):
        p = ("<%d>" % i).encode()
        f.write(bytes([len(p)]) + p)
PY
}
mktok "$tmp/tok.bin" 319
gen "$tmp/t.json" --tokenizer "$tmp/tok.bin" --tokens 256,70,33 --max-new-tokens 12 --temperature 0 "$tmp/tiny"
"$PY" - "$tmp/t.json" <<'PY' || fail "GPT-2 decoding"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["text"] == "".join("<%d>" % t for t in o["tokens"]), o
assert o["tokenizer"] == "gpt2" and len(o["tokens"]) == 12 and o["stop"] == "max_new_tokens", o
PY
stop_at=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokens"][3])' "$tmp/t.json")
mktok "$tmp/tok2.bin" "$stop_at"
gen "$tmp/t2.json" --tokenizer "$tmp/tok2.bin" --tokens 256,70,33 --max-new-tokens 12 --temperature 0 "$tmp/tiny"
"$PY" - "$tmp/t.json" "$tmp/t2.json" "$stop_at" <<'PY' || fail "end-of-text did not stop generation"
import json, sys
a, b, eot = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
want = a["tokens"][:a["tokens"].index(eot)]
assert b["tokens"] == want and b["stop"] == "eot", (a, b)
PY

# train.sample_every: a sample line every N steps on rank 0 (dp = 2 holds the
# whole model on each rank); refused in one line where a rank holds a part.
train 2 "$tmp/sample.log" --set parallel.dp=2 --set train.steps=4 --set train.sample_every=2 ||
  fail "train with samples: $(tail -3 "$tmp/sample.log")"
[ "$(grep -c '^sample: ' "$tmp/sample.log")" = 2 ] || fail "expected 2 sample lines: $(grep -A1 step "$tmp/sample.log")"
rc=0
train 2 "$tmp/sample_tp.log" --set parallel.tp=2 --set train.steps=2 --set train.sample_every=1 || rc=$?
[ $rc -ne 0 ] && grep -q "train.sample_every needs the whole model" "$tmp/sample_tp.log" ||
  fail "sample_every with tp=2: rc $rc, $(tail -3 "$tmp/sample_tp.log")"

# Bad input: one line on stderr, nothing on stdout, a non-zero exit.
bad() { # bad WHAT PATTERN args...
  local what=$1 pat=$2 rc=0
  shift 2
  "$GEN" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
  [ $rc -ne 0 ] || fail "$what: exit 0"
  [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] || fail "$what: not one line: $(cat "$tmp/bad.err")"
  [ ! -s "$tmp/bad.out" ] || fail "$what: wrote to stdout: $(head -c 200 "$tmp/bad.out")"
  grep -q -- "$pat" "$tmp/bad.err" || fail "$what: '$(cat "$tmp/bad.err")' does not say '$pat'"
  echo "refused ($what): $(cat "$tmp/bad.err")"
}
long=$(head -c 100 /dev/zero | tr '\0' x)
bad "non-checkpoint" "f.tok" "$tmp/f.tok"
bad "missing" "nope" "$tmp/nope"
bad "no checkpoint argument" "checkpoint" --prompt hi
bad "long prompt" "context of 64" --prompt "$long" "$tmp/tiny"
bad "wrong tokenizer file" "not an llm.c tokenizer" --tokenizer "$tmp/f.tok" --tokens 1 "$tmp/tiny"
mktok "$tmp/tok400.bin" 50 400
bad "tokenizer larger than the vocabulary" "more than the model" --tokenizer "$tmp/tok400.bin" "$tmp/tiny"
head -c 2000 "$tmp/tok.bin" >"$tmp/tok_cut.bin"
bad "truncated tokenizer" "truncated" --tokenizer "$tmp/tok_cut.bin" "$tmp/tiny"
bad "negative temperature" "--temperature" --temperature -1 "$tmp/tiny"
bad "top-p above 1" "--top-p" --top-p 2 "$tmp/tiny"
bad "max-new-tokens not a number" "--max-new-tokens" --max-new-tokens x "$tmp/tiny"
bad "token out of the vocabulary" "--tokens" --tokens 1,320 "$tmp/tiny"
bad "trailing comma" "--tokens" --tokens 1, "$tmp/tiny"
bad "both prompts" "choose one" --prompt a --tokens 1 "$tmp/tiny"
bad "unknown precision" "precision" --precision fp8 "$tmp/tiny"
bad "unknown device" "backend" --device tpu "$tmp/tiny"
bad "unknown option" "unknown option" --frobnicate "$tmp/tiny"
echo PASS
