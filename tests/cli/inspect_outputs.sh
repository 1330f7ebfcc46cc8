#!/usr/bin/env bash
# boost-inspect's output files and outputs (docs/INSPECT.md, "Output files"):
# dump and plot never destroy what they read or what they fail to replace
# (OUT checked first, written through OUT.tmp, renamed only when complete),
# plot runs gnuplot without a shell, every --json output is valid JSON
# whatever the names, a closed pipe is no damage, a damaged group index fails
# every subcommand that lists datasets, and spectrum refuses NaN/Inf factors.
set -euo pipefail
source "$BOOST_SOURCE_DIR/tests/mpi/ckpt_common.bash"
make_data
train 0 "$tmp/t.log" --set ckpt.dir="$tmp/c" --set train.steps=2 || fail "train: $(tail -3 "$tmp/t.log")"
f=$tmp/c/step_00000002.h5
sum() { md5sum "$@" | cut -d' ' -f1; }
orig=$(sum "$f")
# run NAME EXPECTED_RC ARGS...: boost-inspect ARGS with stdout in $tmp/o, stderr in $tmp/e.
run() {
  local name=$1 want=$2 rc=0
  shift 2
  timeout 60 "$INSPECT" "$@" >"$tmp/o" 2>"$tmp/e" || rc=$?
  [ "$rc" = "$want" ] || fail "$name: exit $rc, expected $want: $(head -3 "$tmp/e")"
  if [ "$want" != 0 ]; then [ "$(wc -l <"$tmp/e")" = 1 ] || fail "$name: not one line: $(cat "$tmp/e")"; fi
}
has() { grep -qF -- "$2" "$tmp/e" || fail "$1: message does not say '$2': $(cat "$tmp/e")"; }
J() { "$PY" -m json.tool "$tmp/o" >"$tmp/json.txt" || fail "$1: --json output does not parse: $(cat "$tmp/o")"; }

# dump: a failed dump leaves OUT and the checkpoint as they were.
cp -r "$tmp/c" "$tmp/c5"
f5=$tmp/c5/step_00000002.h5
run "dump of an unknown dataset onto the checkpoint" 1 dump model/embed.weigth "$f5" "$tmp/c5"
has "unknown dataset" "no dataset named model/embed.weigth"
[ "$(sum "$f5")" = "$orig" ] || fail "a failed dump changed (or deleted) the checkpoint it was told to write"
echo keep >"$tmp/out.bin"
run "dump of an unknown dataset" 1 dump nope "$tmp/out.bin" "$f"
run "dump of an empty category" 1 dump --category activations "$tmp/out.bin" "$f"
[ "$(cat "$tmp/out.bin")" = keep ] || fail "a failed dump deleted or changed the existing OUT"
run "dump OUT == PATH" 1 dump model/final_norm "$f5" "$f5"
has "dump OUT == PATH" "is the input"
run "dump OUT == the checkpoint directory" 1 dump model/final_norm "$tmp/c5" "$tmp/c5"
[ "$(sum "$f5")" = "$orig" ] || fail "dump OUT == PATH changed the checkpoint"
run "dump --category bogus" 2 dump --category bogus "$tmp/out.bin" "$f"
has "--category bogus" "bogus"
mkfifo "$tmp/fifo"
run "dump to a FIFO" 1 dump model/final_norm "$tmp/fifo" "$f"
[ -p "$tmp/fifo" ] || fail "dump replaced the FIFO"
# A write failing midway (file size limit: EFBIG, the signal ignored) keeps the old OUT.
rc=0; (trap '' XFSZ; ulimit -f 64; exec "$INSPECT" dump --category weights "$tmp/out.bin" "$f") >"$tmp/o" 2>"$tmp/e" || rc=$?
[ "$rc" = 1 ] || fail "dump past the file size limit: exit $rc: $(cat "$tmp/e")"
has "dump past the file size limit" "cannot write $tmp/out.bin"
[ "$(cat "$tmp/out.bin")" = keep ] || fail "a dump that failed midway truncated the existing OUT"
[ ! -e "$tmp/out.bin.tmp" ] || fail "a failed dump left out.bin.tmp behind"
run "dump over an existing file" 0 dump model/embed.weight "$tmp/out.bin" "$f"
[ "$(stat -c %s "$tmp/out.bin")" = $((320 * 64 * 4)) ] || fail "dump did not replace OUT with the dataset"
# --all: DIR must exist, every file through tmp + rename, none may be the input.
run "dump --all to a missing directory" 1 dump --all "$tmp/nodir" "$f"
has "dump --all to a missing directory" "No such file or directory"
run "dump --all to a file" 1 dump --all "$tmp/out.bin" "$f"
has "dump --all to a file" "not a directory"
mkdir "$tmp/all" "$tmp/all2"
run "dump --all" 0 dump --all "$tmp/all" "$f"
[ -f "$tmp/all/model__final_norm.bin" ] && ! ls "$tmp/all" | grep -q '\.tmp$' || fail "dump --all: $(ls "$tmp/all" | head)"
ln "$f5" "$tmp/all2/model__final_norm.bin" # a hard link: the same file as the input
run "dump --all onto the input" 1 dump --all "$tmp/all2" "$f5"
has "dump --all onto the input" "is the input"
[ "$(sum "$f5")" = "$orig" ] || fail "dump --all overwrote its input"

# --json escapes names.
run "dump --json, a quote in OUT" 0 dump --json model/final_norm "$tmp/q\"x'y.bin" "$f"
J "dump --json"
"$PY" -c 'import json,sys; assert json.load(open(sys.argv[1]))["out"] == sys.argv[2]' "$tmp/o" "$tmp/q\"x'y.bin" || fail "dump --json: out"

# plot: OUT checked first, gnuplot without a shell.
run "plot onto the checkpoint" 1 plot "$f" -o "$f"
has "plot onto the checkpoint" "is the input"
[ "$(sum "$f")" = "$orig" ] || fail "plot overwrote the checkpoint"
run "plot into a missing directory" 1 plot "$f" -o /nonexist/p.png
has "plot into a missing directory" "/nonexist"
grep -q gnuplot "$tmp/e" && fail "plot into a missing directory blames gnuplot: $(cat "$tmp/e")"
mkdir "$tmp/fake" "$tmp/fail" "$tmp/nobin" "$tmp/w" "$tmp/plottmp"
cat >"$tmp/fake/gnuplot" <<'EOF'
#!/bin/sh
# Stands in for gnuplot: a fake PNG where the script's `set output` says.
out=$(sed -n "s/^set output '\(.*\)'\$/\1/p" "$1" 2>/dev/null)
[ -n "$out" ] || { echo "\"$1\" line 2: no set output" >&2; exit 1; }
printf '\211PNG fake\n' >"$out"
EOF
printf '#!/bin/sh\necho "  plot x"; echo "       ^"; echo "\\"plot.gp\\" line 6: fake failure" >&2; exit 1\n' >"$tmp/fail/gnuplot"
chmod +x "$tmp/fake/gnuplot" "$tmp/fail/gnuplot"
export TMPDIR=$tmp/plottmp # plot's temporary directory: must be gone afterwards
# plot_in BIN NAME EXPECTED_RC ARGS...: plot with BIN first in PATH, in $tmp/w (a shell would `touch pwned` there).
plot_in() {
  local bin=$1 name=$2 want=$3 rc=0
  shift 3
  (cd "$tmp/w" && PATH=$bin:$PATH exec timeout 60 "$INSPECT" plot "$@") >"$tmp/o" 2>"$tmp/e" || rc=$?
  [ "$rc" = "$want" ] || fail "$name: exit $rc, expected $want: $(cat "$tmp/e")"
  [ ! -e "$tmp/w/pwned" ] && [ ! -e "$tmp/pwned" ] || fail "$name: the output name ran as a shell command"
}
plot_in "$tmp/fake" "plot -o \$(touch pwned).png" 0 "$f" -o '$(touch pwned).png'
cmp -s "$tmp/w/\$(touch pwned).png" <(printf '\211PNG fake\n') || fail "plot did not write the PNG under its literal name"
plot_in "$tmp/fake" "plot --json, quotes in -o" 0 --json "$f" -o "$tmp/w/q\"x'y.png"
J "plot --json"
"$PY" -c 'import json,sys; assert json.load(open(sys.argv[1]))["png"] == sys.argv[2]' "$tmp/o" "$tmp/w/q\"x'y.png" || fail "plot --json: png"
echo keep >"$tmp/w/keep.png"
plot_in "$tmp/fail" "plot, gnuplot failing" 1 "$f" -o "$tmp/w/keep.png"
has "plot, gnuplot failing" "line 6: fake failure"
[ "$(cat "$tmp/w/keep.png")" = keep ] || fail "a failed plot changed the existing OUT"
(cd "$tmp/w" && PATH=$tmp/nobin exec "$INSPECT" plot "$f" -o p.png) >"$tmp/o" 2>"$tmp/e" && fail "plot without gnuplot exits 0"
has "plot without gnuplot" "gnuplot is not installed"
[ -z "$(ls -A "$tmp/plottmp")" ] || fail "plot left its temporary directory: $(ls "$tmp/plottmp")"
if command -v gnuplot >/dev/null; then
  rm -f "$tmp/w/"*.png
  plot_in /usr/bin "plot (gnuplot) -o \$(touch pwned).png" 0 "$f" -o '$(touch pwned).png'
  plot_in /usr/bin "plot (gnuplot) -o with quotes" 0 "$f" -o "q\"x'y.png"
  for p in "$tmp/w/\$(touch pwned).png" "$tmp/w/q\"x'y.png"; do
    [ "$(head -c 4 "$p" | tail -c 3)" = PNG ] || fail "gnuplot wrote no PNG at $p"
  done
else
  echo "note: gnuplot not installed, real plots not run (the stand-in ran)"
fi
unset TMPDIR

# A closed pipe is no damage: silent, the shell's 141 (or 0 when all fitted the pipe).
set +o pipefail
"$INSPECT" tensors "$f" 2>"$tmp/e" | head -1 >"$tmp/o"
rc=${PIPESTATUS[0]}
set -o pipefail
[ "$rc" = 141 ] || [ "$rc" = 0 ] || fail "tensors | head -1: exit $rc: $(cat "$tmp/e")"
[ ! -s "$tmp/e" ] || fail "tensors | head -1: $(cat "$tmp/e")"
"$PY" - "$INSPECT" "$f" <<'PY' || fail "boost-inspect with its stdout closed"
import signal, subprocess, sys
for ignore in (False, True):
    signal.signal(signal.SIGPIPE, signal.SIG_IGN if ignore else signal.SIG_DFL)
    p = subprocess.Popen([sys.argv[1], "tensors", sys.argv[2]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         restore_signals=not ignore)
    p.stdout.close()
    err = p.stderr.read()
    rc = p.wait()
    assert rc in (-13, 141) and err == b"", ("SIGPIPE ignored" if ignore else "SIGPIPE default", rc, err)
PY

# A damaged group index (one bit in a link heap block): every subcommand that
# lists datasets fails naming the file, never a shortened list with exit 0.
"$PY" - "$f" "$tmp" <<'PY'
import re, sys
b = open(sys.argv[1], "rb").read()
for i, m in enumerate(re.finditer(b"FHDB", b)):
    c = bytearray(b); c[m.start() + 100] ^= 4
    open("%s/flip%02d.h5" % (sys.argv[2], i), "wb").write(c)
PY
bad=""
for g in "$tmp"/flip*.h5; do
  if ! "$INSPECT" tensors "$g" >"$tmp/o" 2>"$tmp/e"; then bad=$g; break; fi
done
[ -n "$bad" ] || fail "no flip in a heap block makes tensors fail (the test needs one)"
for s in summary stats spectrum "dump --all $tmp/all" "plot -o $tmp/x.png"; do
  run "$s on a damaged group index" 1 $s "$bad"
  has "$s on a damaged group index" "$bad"
done
run "diff A damaged" 1 diff "$f" "$bad"
has "diff A damaged" "$bad"
run "diff damaged B" 1 diff "$bad" "$f"

# spectrum on a factor holding NaN/Inf: one line naming it, exit 1, valid JSON, no LAPACK message.
cp "$f" "$tmp/nan.h5"
"$PY" -c 'import h5py, numpy as np, sys
d = h5py.File(sys.argv[1], "r+")["model/layers.0.attn.o.A"]; x = d[...]; x[0, 0] = np.nan; x[1, 1] = np.inf; d[...] = x' "$tmp/nan.h5"
run "spectrum --json with NaN" 1 spectrum --json "$tmp/nan.h5"
has "spectrum --json with NaN" "layers.0.attn.o.A"
J "spectrum --json with NaN"
grep -q "DLASCL\|On entry" "$tmp/o" "$tmp/e" && fail "LAPACK ran on NaN: $(cat "$tmp/o" "$tmp/e" | grep -m1 "On entry")"

# Messages name the thing and the reason.
run "list of a missing directory" 1 list "$tmp/nonexist"
has "list of a missing directory" "No such file or directory"
run "list of a file" 1 list "$f"
has "list of a file" "not a directory"
echo "ok: boost-inspect outputs: dump/plot keep OUT and the input, no shell, --json escaped, SIGPIPE, damaged index, NaN spectrum"
