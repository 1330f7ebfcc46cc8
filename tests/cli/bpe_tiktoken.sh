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

# A tokenizer.json (Hugging Face, GPT-2 style) of the same small vocabulary
# gives the same tokens; broken ones get one line each.
python3 - "$tmp" <<'EOF'
import json, sys
d = sys.argv[1]
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
ch = {b: chr(c) for b, c in zip(bs, cs)}
vocab = {ch[b]: b for b in range(256)}
vocab.update({"he": 256, "hel": 257, "<|endoftext|>": 258})
good = {"version": "1.0", "added_tokens": [{"id": 258, "content": "<|endoftext|>", "special": True}],
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "vocab": vocab, "merges": ["h e", ["he", "l"]]}}
def write(name, change):
    t = json.loads(json.dumps(good))
    change(t)
    json.dump(t, open("%s/%s.json" % (d, name), "w"), ensure_ascii=False)
write("good", lambda t: None)
write("wordpiece", lambda t: t["model"].update(type="WordPiece"))
write("unknown", lambda t: t["model"]["merges"].append("he zz"))
write("nomerges", lambda t: t["model"].pop("merges"))
write("novocab", lambda t: t.pop("model"))
write("order", lambda t: t["model"].update(merges=["he l", "h e"]))
write("unmade", lambda t: t["model"].update(merges=["h e"]))
write("pretok", lambda t: t.update(pre_tokenizer={"type": "Whitespace"}))
write("added", lambda t: t["added_tokens"].append({"id": 259, "content": "<pad>"}))
write("twoids", lambda t: t["model"]["vocab"].update(hel=256))
EOF
"$BIN" -q --tokenizer "$tmp/good.json" -o "$tmp/json.tok" "$tmp/doc.txt" >/dev/null 2>"$tmp/stderr" ||
  fail "the small tokenizer.json was refused"
cmp -s <(tail -c +257 "$tmp/json.tok") <(tail -c +257 "$tmp/small.tok") || fail "tokenizer.json: other tokens than its rank file"
printf '{"model": ' >"$tmp/notjson.json"
expect_fail "not JSON" "notjson.json: not valid JSON" --tokenizer "$tmp/notjson.json"
expect_fail "model type" "wordpiece.json: model.type is \"WordPiece\", boost reads BPE" --tokenizer "$tmp/wordpiece.json"
expect_fail "unknown merge part" "unknown.json: model.merges[2] (\"he zz\") names \"zz\", which is not in model.vocab" \
  --tokenizer "$tmp/unknown.json"
expect_fail "no merges" "nomerges.json: no model.merges list" --tokenizer "$tmp/nomerges.json"
expect_fail "no vocab" "novocab.json: no model.vocab object" --tokenizer "$tmp/novocab.json"
expect_fail "merge order" "order.json: model.merges[1] (\"h e\", id 256) is not the merge boost's encoder makes" \
  --tokenizer "$tmp/order.json"
expect_fail "token no merge makes" "unmade.json: token id 257 (3 bytes) is made by no merge" --tokenizer "$tmp/unmade.json"
expect_fail "pre-tokenizer" "pretok.json: pre_tokenizer is \"Whitespace\"" --tokenizer "$tmp/pretok.json"
expect_fail "one id twice" "twoids.json: model.vocab gives id 256 to two tokens" --tokenizer "$tmp/twoids.json"
expect_fail "added token" "added.json: added token \"<pad>\" (id 259)" --tokenizer "$tmp/added.json"
expect_fail "json and pattern" "give no pattern" --tokenizer "$tmp/good.json" --pattern 'a'
expect_fail "json and other pre-tokenizer" "its pre-tokenizer is gpt2, not cl100k" --tokenizer "$tmp/good.json" --pretokenizer cl100k

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
