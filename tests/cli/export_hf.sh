#!/usr/bin/env bash
# boost-export --hf (docs/EXPORT.md): a tiny CoLA checkpoint, two tiny
# full-rank ones (untied, tied) and a mixed one trained here, exported in
# fp32 and bf16 (and sharded), then loaded with transformers and safetensors
# (tests/cli/export_hf_check.py): the stored batch's loss equals boost's
# within 1e-5 relative (fp32) and 1e-2 (bf16), greedy generate() of 32
# tokens equals boost's. Bad input gets one line and leaves nothing behind.
#
# Python: transformers, safetensors and Debian's CPU torch in the virtual
# environment scripts/setup-pyenv.sh makes (.cache/pyenv, or $BOOST_PYENV);
# without it the Python part skips (exit 77) and says why, after the checks
# that need no Python have run.
#
# boost's own figures come from boost-eval (--stored-batch) and
# boost-generate, which the build makes (their absence fails the test);
# EXPORT_HF_NEED_TOOLS=0 compares against the float64 numpy model written
# from docs/MODEL.md in export_hf_check.py instead (a build of the exporter
# alone).
set -euo pipefail
source "$BOOST_SOURCE_DIR/tests/mpi/ckpt_common.bash"
EXPORT=$B/tools/boost-export
EVAL=$B/tools/boost-eval
GENERATE=$B/tools/boost-generate
NEED_TOOLS=${EXPORT_HF_NEED_TOOLS:-1}
[ -x "$EXPORT" ] || fail "$EXPORT not built"
make_data

# Checkpoints with every activation stored (the batch's tokens and each
# layer's input), trained long enough to generate more than one character.
# mixed: k and gate full-rank, so qkv and gate_up are stored per projection
# and the CoLA code runs a SwiGLU gate beside bottlenecks.
for m in tiny llama-tiny llama-tied mixed; do
  preset=$m extra=()
  [ $m = llama-tied ] && preset=llama-tiny extra=(--set model.tie_embeddings=1)
  [ $m = mixed ] && preset=tiny extra=(--set model.lowrank=q,v,o,up,down)
  train 0 "$tmp/$m.log" --set model.preset=$preset "${extra[@]}" --set ckpt.dir="$tmp/$m" --set ckpt.activations=all \
    --set train.steps=200 --set train.batch_size=4 --set train.lr=3e-3 || fail "train $m: $(tail -3 "$tmp/$m.log")"
done
ck() { echo "$tmp/$1/step_00000200.h5"; }

# --- Checks without Python -------------------------------------------------
"$EXPORT" --help | grep -q "usage: boost-export --hf DIR CKPT" || fail "--help"
"$EXPORT" --quiet --json --hf "$tmp/cola32" "$tmp/tiny" >"$tmp/j.json" || fail "export of the CoLA checkpoint"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["architecture"]=="ColaForCausalLM" and d["dtype"]=="fp32" and d["tokenizer"]=="byte-v1" and d["step"]==200, d' \
  "$tmp/j.json" || fail "--json summary"
for f in model.safetensors config.json generation_config.json tokenizer.json tokenizer_config.json configuration_cola.py modeling_cola.py README.md; do
  [ -s "$tmp/cola32/$f" ] || fail "the CoLA export lacks $f"
done
cmp -s "$tmp/cola32/modeling_cola.py" "$BOOST_SOURCE_DIR/tools/export/hf/modeling_cola.py" || fail "embedded modeling_cola.py differs from tools/export/hf/"
"$EXPORT" --quiet --hf "$tmp/cola16" --dtype bf16 "$(ck tiny)" >/dev/null || fail "bf16 export"
"$EXPORT" --quiet --hf "$tmp/llama32" "$tmp/llama-tiny" >/dev/null || fail "llama export"
[ ! -e "$tmp/llama32/modeling_cola.py" ] || fail "a LLaMA export carries remote code"
"$EXPORT" --quiet --hf "$tmp/llama16" --dtype bf16 --max-shard-size 200KB "$tmp/llama-tiny" >/dev/null || fail "sharded export"
[ -s "$tmp/llama16/model.safetensors.index.json" ] && [ -s "$tmp/llama16/model-00001-of-00003.safetensors" ] || fail "no shards: $(ls "$tmp/llama16")"
"$EXPORT" --quiet --hf "$tmp/tied32" "$tmp/llama-tied" >/dev/null || fail "tied export"
grep -q '"tie_word_embeddings":	true' "$tmp/tied32/config.json" || fail "tied embeddings not in config.json"
"$EXPORT" --quiet --hf "$tmp/mixed32" "$tmp/mixed" >/dev/null || fail "mixed export"
"$EXPORT" --quiet --hf "$tmp/notok" --tokenizer none "$tmp/mixed" >/dev/null || fail "--tokenizer none"
[ ! -e "$tmp/notok/tokenizer.json" ] && ! grep -q eos_token_id "$tmp/notok/config.json" || fail "--tokenizer none wrote a tokenizer"

# A boost-reshard --bf16 checkpoint exports as bf16 by default, the same
# bytes as --dtype bf16 from the fp32 masters; fp32 from it is refused.
"$B/tools/boost-reshard" "$(ck tiny)" "$tmp/r16.h5" --layout dp=1,tp=1,pp=1 --bf16 --quiet >"$tmp/r.log" 2>&1 || fail "reshard --bf16: $(cat "$tmp/r.log")"
"$EXPORT" --quiet --hf "$tmp/from16" "$tmp/r16.h5" >/dev/null || fail "export of a bf16 reshard"
cmp -s "$tmp/from16/model.safetensors" "$tmp/cola16/model.safetensors" || fail "bf16 rounding differs from boost-reshard --bf16's"

# Bad input: one line on stderr, exit 1 (usage: 2), nothing written or left.
refuse() { # refuse STATUS PATTERN args...
  local want=$1 pat=$2 rc=0
  shift 2
  "$EXPORT" --quiet "$@" >"$tmp/o.txt" 2>"$tmp/e.txt" || rc=$?
  [ "$rc" = "$want" ] || fail "$*: exit $rc, expected $want ($(cat "$tmp/e.txt"))"
  [ "$(wc -l <"$tmp/e.txt")" = 1 ] && grep -q -- "$pat" "$tmp/e.txt" || fail "$*: expected one line with '$pat', got: $(cat "$tmp/e.txt")"
}
mkdir "$tmp/exists" && echo keep >"$tmp/exists/file"
refuse 1 "exists" --hf "$tmp/exists" "$(ck tiny)"
[ "$(cat "$tmp/exists/file")" = keep ] && [ "$(ls "$tmp/exists")" = file ] || fail "an existing folder was touched"
echo "not hdf5" >"$tmp/junk.h5"
refuse 1 "junk.h5" --hf "$tmp/x1" "$tmp/junk.h5"
refuse 1 "bfloat16 weights" --hf "$tmp/x2" --dtype fp32 "$tmp/r16.h5"
refuse 2 "unknown option" --hf "$tmp/x3" --frobnicate "$(ck tiny)"
refuse 2 "required" "$(ck tiny)"
refuse 1 "dtype" --hf "$tmp/x4" --dtype fp16 "$(ck tiny)"
refuse 1 "max-shard-size" --hf "$tmp/x5" --max-shard-size lots "$(ck tiny)"
refuse 1 "parent folder" --hf "$tmp/no/such/dir" "$(ck tiny)"
refuse 1 "beyond the model's vocab" --hf "$tmp/x8" --tokenizer gpt2 "$(ck tiny)"
refuse 1 "expected auto, byte, gpt2 or none" --hf "$tmp/x9" --tokenizer sentencepiece "$(ck tiny)"
cp "$(ck tiny)" "$tmp/missing.h5"
"$PY" -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r+"); del f["model/layers.2.mlp.down.B"]' "$tmp/missing.h5"
refuse 1 "layers.2.mlp.down.B is missing" --hf "$tmp/x6" "$tmp/missing.h5"
cp "$(ck llama-tiny)" "$tmp/flip.h5"
"$PY" -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r+"); d=f["model/layers.1.attn.o.W"]; d[0,0]=d[0,0]+1' "$tmp/flip.h5"
refuse 1 "checksum mismatch" --hf "$tmp/x7" "$tmp/flip.h5"
for x in x1 x2 x3 x4 x5 x6 x7 x8 x9; do [ ! -e "$tmp/$x" ] || fail "a refused export left $x"; done
ls -d "$tmp"/*.tmp-* 2>/dev/null && fail "a temporary folder was left behind"

# --- The safetensors files, byte by byte (numpy and h5py: no environment) --
if [ "$NEED_TOOLS" = 1 ]; then
  [ -x "$EVAL" ] && [ -x "$GENERATE" ] || fail "EXPORT_HF_NEED_TOOLS=1 but boost-eval or boost-generate is not built"
fi
prompt=$("$PY" -c 'import h5py,sys; print(",".join(map(str, h5py.File(sys.argv[1],"r")["activations/tokens"][0,:12])))' "$(ck tiny)")
# Each case: the export, its checkpoint, and boost's loss and tokens where
# boost-eval and boost-generate are built (else the numpy model's).
cases=()
case_json() { # case_json DIR CKPT KIND DTYPE RTOL
  local loss=null toks=null
  if [ -x "$EVAL" ]; then
    loss=$("$EVAL" "$2" --stored-batch --json | "$PY" -c 'import json,sys; print(repr(json.load(sys.stdin)["loss"]))') ||
      fail "boost-eval $2"
  fi
  if [ -x "$GENERATE" ] && [ "$4" = fp32 ]; then
    toks=$("$GENERATE" "$2" --tokens "$prompt" --max-new-tokens 32 --temperature 0 --json |
      "$PY" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["tokens"]))') || fail "boost-generate $2"
  fi
  cases+=("{\"export\": \"$1\", \"ckpt\": \"$2\", \"kind\": \"$3\", \"dtype\": \"$4\", \"rtol\": $5, \"prompt\": [$prompt], \"new\": 32, \"boost_loss\": $loss, \"boost_tokens\": $toks}")
}
case_json "$tmp/cola32" "$(ck tiny)" cola fp32 1e-5
case_json "$tmp/cola16" "$(ck tiny)" cola bf16 1e-2
case_json "$tmp/llama32" "$(ck llama-tiny)" llama fp32 1e-5
case_json "$tmp/llama16" "$(ck llama-tiny)" llama bf16 1e-2
case_json "$tmp/tied32" "$(ck llama-tied)" llama fp32 1e-5
case_json "$tmp/mixed32" "$(ck mixed)" cola fp32 1e-5
(IFS=,; echo "[${cases[*]}]") >"$tmp/cases.json"
"$PY" "$BOOST_SOURCE_DIR/tests/cli/export_hf_check.py" --layout-only "$tmp/cases.json" >"$tmp/layout.out" 2>"$tmp/layout.err" ||
  fail "safetensors layout: $(tail -3 "$tmp/layout.err")"
[ "$(grep -c '"layout": "ok"' "$tmp/layout.out")" = 6 ] || fail "layout check: $(cat "$tmp/layout.out")"

# --- transformers and safetensors --------------------------------------------
PYENV=${BOOST_PYENV:-$BOOST_SOURCE_DIR/.cache/pyenv}
if [ ! -x "$PYENV/bin/python" ]; then
  echo "SKIP: no Python environment at $PYENV (make it with: bash scripts/setup-pyenv.sh)"
  exit 77
fi
if ! why=$("$PYENV/bin/python" -c 'import torch, transformers, safetensors, h5py, numpy' 2>&1); then
  echo "SKIP: $PYENV lacks a package the check needs: $(echo "$why" | tail -1)"
  exit 77
fi
TOKENIZERS_PARALLELISM=false "$PYENV/bin/python" "$BOOST_SOURCE_DIR/tests/cli/export_hf_check.py" "$tmp/cases.json" \
  >"$tmp/check.out" 2>"$tmp/check.err" || fail "transformers check: $(grep -v -i warn "$tmp/check.err" | tail -4)"
cat "$tmp/check.out"
[ "$(wc -l <"$tmp/check.out")" = 6 ] || fail "expected 6 checked exports, got $(wc -l <"$tmp/check.out")"
echo "export_hf: ok"
