# boost-data end to end: a good run (directories, fortune splitting, skip
# rules, --json, --info, determinism) and every bad input exiting non-zero
# with one "boost-data: ..." line on stderr.
set -euo pipefail

: "${BOOST_BINARY_DIR:?set BOOST_BINARY_DIR to the build directory}"
BIN="$BOOST_BINARY_DIR/tools/boost-data"
[[ -x "$BIN" ]] || { echo "FAIL: $BIN is not built" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; [[ -f "$tmp/stderr" ]] && sed 's/^/  stderr: /' "$tmp/stderr" >&2; exit 1; }
json_get() { # json_get FILE EXPR  (EXPR in python, d = the parsed document)
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# ---- corpus ----
c="$tmp/corpus"
mkdir -p "$c/sub" "$c/fortunes" "$c/.hidden"
printf 'hello\n' >"$c/a.txt"
printf 'world\n' >"$c/sub/b.txt"
printf 'one\n%%\ntwo\n%%\nthree\n%%\n' >"$c/fortunes/f"
printf 'index' >"$c/fortunes/f.dat"
printf 'utf8' >"$c/fortunes/f.u8"
ln -s a.txt "$c/link.txt"
printf 'a\0b\n' >"$c/blob.txt"
: >"$c/empty.txt"
printf 'secret\n' >"$c/.hidden/h.txt"
# documents: a.txt, sub/b.txt, 3 fortunes; tokens = 5 EOT + 6 + 6 + 4 + 4 + 6
want_docs=5 want_tokens=31 want_bytes=32

# ---- good run ----
out="$tmp/out.tok"
"$BIN" -o "$out" "$c" >"$tmp/stdout" 2>"$tmp/stderr" || fail "good run exited non-zero"
[[ -s "$out" ]] || fail "no output written"
[[ ! -e "$out.tmp" ]] || fail "temp file left behind"
grep -q "wrote $out" "$tmp/stdout" || fail "no summary on stdout"
grep -q "5 documents, 31 tokens" "$tmp/stdout" || fail "summary: $(cat "$tmp/stdout")"

"$BIN" --json -q -o "$tmp/out2.tok" "$c" >"$tmp/run.json" 2>"$tmp/stderr" || fail "--json run failed"
python3 -c 'import json,sys; json.load(sys.stdin)' <"$tmp/run.json" || fail "--json output is not JSON"
[[ $(json_get "$tmp/run.json" 'd["files"]') == 3 ]] || fail "files: $(cat "$tmp/run.json")"
[[ $(json_get "$tmp/run.json" 'd["documents"]') == "$want_docs" ]] || fail "documents"
[[ $(json_get "$tmp/run.json" 'd["tokens"]') == "$want_tokens" ]] || fail "tokens"
[[ $(json_get "$tmp/run.json" 'd["bytes"]') == "$want_bytes" ]] || fail "bytes"
[[ $(json_get "$tmp/run.json" 'd["output"]') == "$tmp/out2.tok" ]] || fail "output path"
[[ $(json_get "$tmp/run.json" 'd["skipped"]["binary"]') == 1 ]] || fail "binary skip"
[[ $(json_get "$tmp/run.json" 'd["skipped"]["empty"]') == 1 ]] || fail "empty skip"
[[ $(json_get "$tmp/run.json" 'd["skipped"]["symlinks"]') == 1 ]] || fail "symlink skip"
[[ $(json_get "$tmp/run.json" 'd["skipped"]["dat_u8"]') == 2 ]] || fail ".dat/.u8 skip"
[[ $(json_get "$tmp/run.json" 'd["skipped"]["hidden"]') == 1 ]] || fail "hidden skip"
cmp -s "$out" "$tmp/out2.tok" || fail "two runs over the same inputs differ"

# Argument order does not matter; a file named twice is read once.
"$BIN" -q -o "$tmp/out3.tok" "$c/sub" "$c/fortunes" "$c/a.txt" "$c/a.txt" >/dev/null 2>"$tmp/stderr" ||
  fail "run with explicit files failed"
cmp -s "$out" "$tmp/out3.tok" || fail "sorted order/dedupe: outputs differ"

# Without fortune splitting the fortune file is one document.
"$BIN" --json --no-fortune-split -o "$tmp/nosplit.tok" "$c" >"$tmp/ns.json" 2>"$tmp/stderr" || fail "--no-fortune-split"
[[ $(json_get "$tmp/ns.json" 'd["documents"]') == 3 ]] || fail "--no-fortune-split documents"
"$BIN" --json --fortune-split -o "$tmp/split.tok" "$c/a.txt" >"$tmp/fs.json" 2>"$tmp/stderr" || fail "--fortune-split"
[[ $(json_get "$tmp/fs.json" 'd["documents"]') == 1 ]] || fail "--fortune-split documents"

# Token payload: EOT (256) then the bytes of each document, as uint16 LE.
python3 - "$out" <<'EOF' || fail "payload is not the byte-v1 tokenization"
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"BOOSTTOK", b[:8]
n = struct.unpack_from("<Q", b, 24)[0]
tok = struct.unpack_from("<%dH" % n, b, 256)
text = b"".join(b"|" if t == 256 else bytes([t]) for t in tok)
assert text == b"|hello\n|one\n|two\n|three\n|world\n", text
EOF

# ---- --info ----
"$BIN" --info "$out" >"$tmp/info.txt" 2>"$tmp/stderr" || fail "--info failed"
grep -q "byte-v1" "$tmp/info.txt" || fail "--info lacks tokenizer"
grep -q "tokens: *31" "$tmp/info.txt" || fail "--info lacks token count"
"$BIN" --info --json "$out" >"$tmp/info.json" 2>"$tmp/stderr" || fail "--info --json failed"
python3 -c 'import json,sys; json.load(sys.stdin)' <"$tmp/info.json" || fail "--info --json is not JSON"
[[ $(json_get "$tmp/info.json" 'd["tokens"]') == 31 ]] || fail "--info --json tokens"
[[ $(json_get "$tmp/info.json" 'd["vocab_size"]') == 257 ]] || fail "--info --json vocab"

python3 - "$tmp/gpt2.bin" <<'EOF'
import struct, sys
h = [0] * 256
h[0], h[1], h[2] = 20240520, 1, 4
open(sys.argv[1], "wb").write(struct.pack("<256i", *h) + struct.pack("<4H", 50256, 1, 2, 3))
EOF
"$BIN" --info --json "$tmp/gpt2.bin" >"$tmp/llmc.json" 2>"$tmp/stderr" || fail "--info on llm.c .bin failed"
[[ $(json_get "$tmp/llmc.json" 'd["format"]') == "llm.c" ]] || fail "llm.c format"
[[ $(json_get "$tmp/llmc.json" 'd["max_token"]') == 50256 ]] || fail "llm.c max token"

"$BIN" --help >"$tmp/help.txt" || fail "--help exited non-zero"
grep -q "^usage: boost-data" "$tmp/help.txt" || fail "--help text"

# ---- bad inputs: non-zero exit, one line "boost-data: ..." naming the problem ----
expect_fail() { # expect_fail WHAT SUBSTRING ARGS...
  local what=$1 pat=$2 rc=0
  shift 2
  "$BIN" "$@" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  [[ $rc -ne 0 ]] || fail "$what: exit status 0"
  [[ $(wc -l <"$tmp/stderr") -eq 1 ]] || fail "$what: expected one stderr line"
  grep -q '^boost-data: ' "$tmp/stderr" || fail "$what: stderr lacks the boost-data: prefix"
  grep -qF -- "$pat" "$tmp/stderr" || fail "$what: stderr lacks \"$pat\""
}

expect_fail "missing input" "$tmp/missing.txt: No such file" -o "$tmp/x.tok" "$tmp/missing.txt"
expect_fail "no inputs" "no inputs" -o "$tmp/x.tok"
expect_fail "no output" "no output" "$c"
expect_fail "-o without value" "needs an argument" "$c" -o
expect_fail "unknown long option" "unknown option --bogus" --bogus -o "$tmp/x.tok" "$c"
expect_fail "unknown short option" "unknown option -z" -z -o "$tmp/x.tok" "$c"
expect_fail "unwritable output" "cannot write $tmp/no/such/dir/x.tok: directory $tmp/no/such/dir: No such file or directory" -o "$tmp/no/such/dir/x.tok" "$c"
expect_fail "only binary input" "no text documents" -o "$tmp/x.tok" "$c/blob.txt"
expect_fail "output among inputs" "output $c/a.txt is the input $c/a.txt" -o "$c/a.txt" "$c"
[[ ! -e "$tmp/x.tok" && ! -e "$tmp/x.tok.tmp" ]] || fail "a failed run left an output behind"
[[ $(cat "$c/a.txt") == hello ]] || fail "a failed run clobbered an existing file"
# an input named like the output's temporary: writing OUT.tmp would destroy it
printf 'some text\n' >"$tmp/in.tok.tmp"
expect_fail "input is OUT.tmp" "the output's temporary $tmp/in.tok.tmp is the input" -o "$tmp/in.tok" "$tmp/in.tok.tmp"
[[ $(cat "$tmp/in.tok.tmp") == "some text" ]] || fail "the input named OUT.tmp was destroyed"
mkfifo "$tmp/fifo"
expect_fail "output is a FIFO" "output $tmp/fifo exists and is not a regular file" -o "$tmp/fifo" "$c"
[[ -p "$tmp/fifo" ]] || fail "the FIFO was replaced by a file"

expect_fail "--info missing" "No such file" --info "$tmp/missing.tok"
expect_fail "--info text file" "bad magic" --info "$c/fortunes/f"
expect_fail "--info two files" "exactly one" --info "$out" "$out"
cp "$out" "$tmp/corrupt.tok"
printf '\x41' | dd of="$tmp/corrupt.tok" bs=1 seek=260 conv=notrunc status=none
expect_fail "--info corrupted payload" "checksum mismatch" --info "$tmp/corrupt.tok"
head -c 270 "$out" >"$tmp/trunc.tok"
expect_fail "--info truncated" "truncated" --info "$tmp/trunc.tok"
cp "$out" "$tmp/v9.tok"
printf '\x09' | dd of="$tmp/v9.tok" bs=1 seek=8 conv=notrunc status=none
expect_fail "--info unknown version" "unsupported boost token shard version 9" --info "$tmp/v9.tok"

echo "data_errors: all checks passed"
