#!/usr/bin/env bash
# boost-data --tokenizer (BPE, trainer/data/bpe.h) against tiktoken, token for
# token, on a held corpus (fortunes, multilingual text, long digit and
# whitespace runs, contractions, emoji, invalid UTF-8, random code points and
# bytes: tests/cli/bpe_tiktoken_check.py writes it) for the gpt2, cl100k and
# llama3 pre-tokenizers: GPT-2's own rank file under gpt2, and under the other
# two a rank file this test builds from it (their vocabularies are not on
# PyPI; lines reversed, CRLF ends: order and line ends must not matter).
# Also: bad rank files, patterns and shard mixes get one line each, exit 1
# and leave no shard behind.
#
# Needs tiktoken and transformers (.cache/pyenv, scripts/setup-pyenv.sh) and
# GPT-2's rank file (.cache/tokenizers/gpt2.tiktoken, the same script; or
# $BOOST_GPT2_RANKS); without them the comparison skips (exit 77) after the
# bad-input checks have run.
set -euo pipefail

: "${BOOST_BINARY_DIR:?set BOOST_BINARY_DIR to the build directory}"
: "${BOOST_SOURCE_DIR:?set BOOST_SOURCE_DIR to the source directory}"
BIN="$BOOST_BINARY_DIR/tools/boost-data"
[[ -x "$BIN" ]] || { echo "FAIL: $BIN is not built" >&2; exit 1; }
CHECK="$BOOST_SOURCE_DIR/tests/cli/bpe_tiktoken_check.py"
PYENV=${BOOST_PYENV:-$BOOST_SOURCE_DIR/.cache/pyenv}
GPT2=${BOOST_GPT2_RANKS:-$BOOST_SOURCE_DIR/.cache/tokenizers/gpt2.tiktoken}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; [[ -f "$tmp/stderr" ]] && sed 's/^/  stderr: /' "$tmp/stderr" >&2; exit 1; }

# ---- bad inputs (no Python needed) ----
# A small valid rank file: the 256 bytes (ranks 0..255) and two merges.
python3 - "$tmp/small.tiktoken" <<'EOF'
import base64, sys
toks = [bytes([b]) for b in range(256)] + [b"he", b"hel"]
with open(sys.argv[1], "w") as f:
    for r, t in enumerate(toks):
        f.write("%s %d\n" % (base64.b64encode(t).decode(), r))
EOF
printf 'hello\n' >"$tmp/doc.txt"
"$BIN" -q --tokenizer "$tmp/small.tiktoken" -o "$tmp/small.tok" "$tmp/doc.txt" >/dev/null 2>"$tmp/stderr" ||
  fail "the small rank file was refused"
# h, e, l, l, o, \n -> (he)(l) -> hel + l + o + \n; EOT 258 first
got=$(python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack_from("<Q",b,24)[0]; print(*struct.unpack_from("<%dH"%n,b,256))' "$tmp/small.tok")
[[ $got == "258 257 108 111 10" ]] || fail "small vocabulary: tokens $got, expected 258 257 108 111 10"

expect_fail() { # NAME EXPECTED-SUBSTRING ARGS...
  local name=$1 want=$2
  shift 2
  rm -f "$tmp/out.tok"
  if "$BIN" -q "$@" -o "$tmp/out.tok" "$tmp/doc.txt" >/dev/null 2>"$tmp/stderr"; then fail "$name: exit 0"; fi
  [[ $(wc -l <"$tmp/stderr") -eq 1 ]] || fail "$name: not one line"
  grep -qF -- "$want" "$tmp/stderr" || fail "$name: expected \"$want\""
  [[ ! -e "$tmp/out.tok" && ! -e "$tmp/out.tok.tmp" ]] || fail "$name: left a shard behind"
}
bad() { # NAME LINE-TO-APPEND
  head -n 200 "$tmp/small.tiktoken" >"$tmp/bad.tiktoken"
  printf '%s\n' "$2" >>"$tmp/bad.tiktoken"
  tail -n +201 "$tmp/small.tiktoken" >>"$tmp/bad.tiktoken"
}
bad base64 'not*base64 300'
expect_fail "bad base64" "bad.tiktoken:201: \"not*base64\" is not a base64 token" --tokenizer "$tmp/bad.tiktoken"
bad rank 'aGk= x1'
expect_fail "bad rank" "bad.tiktoken:201: rank \"x1\" is not a whole number" --tokenizer "$tmp/bad.tiktoken"
bad fields 'aGk='
expect_fail "one field" "bad.tiktoken:201: expected \"BASE64 RANK\"" --tokenizer "$tmp/bad.tiktoken"
bad twice 'aGk= 7'
expect_fail "rank twice" "bad.tiktoken:201: rank 7 given twice (first on line 8)" --tokenizer "$tmp/bad.tiktoken"
bad token 'aA== 300'
expect_fail "token twice" "bad.tiktoken:201: token given twice" --tokenizer "$tmp/bad.tiktoken"
grep -v '^QQ== ' "$tmp/small.tiktoken" >"$tmp/bad.tiktoken"
expect_fail "missing byte" "byte 0x41 is no token" --tokenizer "$tmp/bad.tiktoken"
: >"$tmp/bad.tiktoken"
expect_fail "empty file" "bad.tiktoken: no tokens" --tokenizer "$tmp/bad.tiktoken"
expect_fail "missing file" "nothere: cannot open the rank file" --tokenizer "$tmp/nothere"
expect_fail "unknown pre-tokenizer" "unknown pre-tokenizer \"gpt3\"" --tokenizer "$tmp/small.tiktoken" --pretokenizer gpt3
expect_fail "bad pattern" "pre-tokenizer pattern: at offset" --tokenizer "$tmp/small.tiktoken" --pattern '(\p{L}+'
expect_fail "pattern and name" "both given" --tokenizer "$tmp/small.tiktoken" --pattern 'a' --pretokenizer gpt2

# --info shows the v2 header: the tokenizer name and hash.
"$BIN" -q -o "$tmp/bytes.tok" "$tmp/doc.txt" >/dev/null 2>"$tmp/stderr" || fail "byte shard"
"$BIN" --info --json "$tmp/small.tok" >"$tmp/info.json" 2>"$tmp/stderr" || fail "--info on a v2 shard"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["version"]==2 and d["tokenizer"]=="bpe-gpt2" and len(d["tokenizer_hash"])==16, d' \
  "$tmp/info.json" || fail "--info --json of a BPE shard"

# ---- tiktoken ----
if ! "$PYENV/bin/python" -c 'import tiktoken, transformers' 2>/dev/null; then
  echo "SKIP: tiktoken/transformers not in $PYENV (scripts/setup-pyenv.sh installs them)"
  exit 77
fi
if [[ ! -s $GPT2 ]]; then
  echo "SKIP: no GPT-2 rank file at $GPT2 (scripts/setup-pyenv.sh fetches it)"
  exit 77
fi
"$PYENV/bin/python" "$CHECK" corpus "$tmp/corpus"
"$PYENV/bin/python" "$CHECK" ranks "$GPT2" "$tmp/built.tiktoken"
for pre in gpt2 cl100k llama3; do
  ranks=$tmp/built.tiktoken
  [[ $pre == gpt2 ]] && ranks=$GPT2
  "$BIN" -q --no-fortune-split --threads 2 --tokenizer "$ranks" --pretokenizer $pre -o "$tmp/$pre.tok" "$tmp/corpus" \
    >/dev/null 2>"$tmp/stderr" || fail "boost-data --pretokenizer $pre"
  "$PYENV/bin/python" "$CHECK" compare $pre "$ranks" "$tmp/corpus" "$tmp/$pre.tok" || fail "$pre differs from tiktoken"
done
# A custom pattern is the same as the named one it spells out.
"$BIN" -q --no-fortune-split --tokenizer "$GPT2" --pattern "$("$PYENV/bin/python" -c 'import tiktoken_ext.openai_public as o; print(o.r50k_pat_str)')" \
  -o "$tmp/custom.tok" "$tmp/corpus" >/dev/null 2>"$tmp/stderr" || fail "--pattern"
"$PYENV/bin/python" "$CHECK" compare gpt2 "$GPT2" "$tmp/corpus" "$tmp/custom.tok" || fail "--pattern differs"
echo "PASS: bpe_tiktoken"
