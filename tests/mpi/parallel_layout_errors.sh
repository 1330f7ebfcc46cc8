# Invalid parallel layouts (issue 3, deliverable 7): boost-train under mpirun
# must exit non-zero before any work starts, with exactly one error line, on
# rank 0's stderr, naming the offending key. A valid layout is run first as a
# control (so a broken boost-train cannot pass this test by failing).
set -euo pipefail

: "${BOOST_BINARY_DIR:?set BOOST_BINARY_DIR to the build directory}"
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
TRAIN="$BOOST_BINARY_DIR/trainer/boost-train"
DATA_TOOL="$BOOST_BINARY_DIR/tools/boost-data"
CORPUS=${BOOST_TEST_CORPUS:-/usr/share/games/fortunes}
for f in "$TRAIN" "$DATA_TOOL"; do [[ -x "$f" ]] || { echo "FAIL: $f is not built" >&2; exit 1; }; done
[[ -e "$CORPUS" ]] || { echo "FAIL: corpus $CORPUS is missing (Debian: fortunes-min or fortunes)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$DATA_TOOL" -q -o "$tmp/f.tok" "$CORPUS" >/dev/null

failures=0
bad() { # bad CASE_DIR MESSAGE
  echo "FAIL: $2" >&2
  grep -v '<stdout>:  ' "$1/out" | sed 's/^/  stdout: /' >&2 || true
  sed 's/^/  stderr: /' "$1/err" >&2 || true
  failures=$((failures + 1))
}

# launch DIR NP SETS... : boost-train on NP ranks with tagged output
# ([job,rank]<stream>:) into DIR/out, DIR/err and the exit status into DIR/rc.
launch() {
  local dir=$1 np=$2
  shift 2
  mkdir -p "$dir"
  local args=(--set "data.train=$tmp/f.tok" --set train.steps=1 --set train.val_batches=0 --set train.threads=1)
  for s in "$@"; do args+=(--set "$s"); done
  local rc=0
  # shellcheck disable=SC2086 # MPIRUN is a command line
  timeout 120 $MPIRUN --tag-output -n "$np" "$TRAIN" "${args[@]}" >"$dir/out" 2>"$dir/err" || rc=$?
  echo "$rc" >"$dir/rc"
}

# Cases: NAME;NP;REGEX;SETS (space-separated key=value). Each must exit
# non-zero with one stderr line from the ranks, rank 0's, matching
# "boost-train: .*REGEX", and no training output.
cases=(
  "world size mismatch;3;dp\*tp\*pp = 2\*1\*1 = 2 does not match the 3 MPI ranks;parallel.dp=2"
  "world size mismatch (tp);2;dp\*tp\*pp = 1\*4\*1 = 4 does not match the 2 MPI ranks;parallel.tp=4"
  "heads not divisible;3;model\.n_heads 4 is not divisible by parallel\.tp 3;parallel.tp=3"
  # d_model cannot fail alone: config validation makes d divisible by
  # n_heads, and n_heads is checked against tp first.
  "ffn not divisible;2;model\.ffn 175 is not divisible by parallel\.tp 2;parallel.tp=2 model.ffn=175"
  "vocab not divisible;2;model\.vocab 321 is not divisible by parallel\.tp 2;parallel.tp=2 model.vocab=321"
  "vanilla rank not divisible;2;model\.rank_attn 15;parallel.tp=2 parallel.tp_mode=vanilla model.rank_attn=15"
  "btp on a full-rank model;2;parallel\.tp_mode=btp;parallel.tp=2 parallel.tp_mode=btp model.preset=llama-tiny"
  "vanilla on a full-rank model;2;parallel\.tp_mode=vanilla;parallel.tp=2 parallel.tp_mode=vanilla model.preset=llama-tiny"
  "megatron on a low-rank model;2;parallel\.tp_mode=megatron;parallel.tp=2 parallel.tp_mode=megatron"
  "mixed low-rank/full-rank with tp;2;model\.lowrank;parallel.tp=2 model.lowrank=q,k,v"
  "tied embeddings with tp>1;2;model\.tie_embeddings;parallel.tp=2 model.tie_embeddings=true"
  "more stages than layers;2;parallel\.pp 2 exceeds model\.n_layers 1;parallel.pp=2 model.n_layers=1"
  "stage sizes not summing to the layers;2;parallel\.stages;parallel.pp=2 parallel.stages=1,1"
  "stage sizes malformed;2;parallel\.stages;parallel.pp=2 parallel.stages=2,x"
  "tied embeddings with pp>1;2;model\.tie_embeddings;parallel.pp=2 model.tie_embeddings=true"
  "world size mismatch (3D);4;dp\*tp\*pp = 2\*2\*2 = 8 does not match the 4 MPI ranks;parallel.dp=2 parallel.tp=2 parallel.pp=2"
)

# mpirun takes ~1.5 s to wind down a job whose ranks exit non-zero (waiting,
# not computing), so the cases run 4 at a time.
launch "$tmp/control" 2 parallel.tp=2 parallel.tp_mode=btp &
launch "$tmp/control-pp" 2 parallel.pp=2 train.grad_accum=2 &
for i in "${!cases[@]}"; do
  IFS=';' read -r _ np _ sets <<<"${cases[$i]}"
  # shellcheck disable=SC2086 # sets is a word list
  launch "$tmp/case$i" "$np" $sets &
  while (($(jobs -rp | wc -l) >= 4)); do wait -n || true; done
done
wait

# Controls: valid tensor- and pipeline-parallel layouts train (a broken
# boost-train must not pass this test by failing everywhere).
for c in "control;dp=1 tp=2 btp" "control-pp;dp=1 pp=2"; do
  IFS=';' read -r dir what <<<"$c"
  d="$tmp/$dir"
  if [[ $(cat "$d/rc") != 0 ]] || ! grep -qE '<stdout>:step +1/1' "$d/out"; then
    bad "$d" "control: $what did not train one step (exit $(cat "$d/rc"))"
  else
    echo "PASS control (np=2): $what trains"
  fi
done

for i in "${!cases[@]}"; do
  IFS=';' read -r name np re sets <<<"${cases[$i]}"
  d="$tmp/case$i"
  rc=$(cat "$d/rc")
  lines=$(grep -cE '^\[[0-9]+,[0-9]+\]<stderr>:' "$d/err" || true)
  if [[ $rc == 0 ]]; then
    bad "$d" "$name ($sets): exit status 0, want non-zero"
  elif [[ $lines != 1 ]]; then
    bad "$d" "$name ($sets): $lines error lines from the ranks, want exactly 1"
  elif ! grep -qE "^\[[0-9]+,0\]<stderr>:boost-train: .*$re" "$d/err"; then
    bad "$d" "$name ($sets): the error line is not rank 0's 'boost-train: ...' matching /$re/"
  elif grep -qE '<stdout>:(model |layout |step )' "$d/out"; then
    bad "$d" "$name ($sets): work started before the error"
  else
    echo "PASS $name (np=$np): $(grep -E '<stderr>:' "$d/err" | sed 's/^[^:]*://')"
  fi
done

if ((failures)); then
  echo "FAIL: $failures invalid-layout case(s)" >&2
  exit 1
fi
echo "OK: every invalid layout refused with one line"
