# Communication is what the formulas say (issue 3, acceptance): with the
# counters reset, one model_forward and one model_backward of a 1 x 8
# micro-batch on 2 layers must count exactly these tp all-reduce bytes
# (4 bytes per float, N = b*s tokens, per layer):
#   btp      forward 7*N*r + 2*N (fused norm scalars)   backward 7*N*r
#   vanilla  forward N*(5d + 2*ffn)                      backward N*(3d + ffn)
#   megatron forward 2*N*d                               backward 2*N*d
# plus the head: forward 3*N (parallel cross-entropy: max, sum, target logit),
# backward N*d (the final norm output's gradient). btp must use one
# all-reduce per norm+projection group (4 per layer) and gather the head
# input once; nothing else may be communicated. For the tiny and cola-60m
# shapes (r = d/4) btp's per-layer bytes must be <= 0.27x vanilla's, forward
# and forward+backward. The vocabulary is cut to 512 to keep the 60m shape
# cheap (the head's bytes do not depend on it). With --recompute lowrank
# btp's backward must count exactly the same bytes and calls as without
# (recompute adds no collective); full recompute adds the forward's.
set -euo pipefail

: "${BOOST_BINARY_DIR:?set BOOST_BINARY_DIR to the build directory}"
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
CHECK="$BOOST_BINARY_DIR/tests/mpi/parallel_check"
DATA_TOOL="$BOOST_BINARY_DIR/tools/boost-data"
CORPUS=${BOOST_TEST_CORPUS:-/usr/share/games/fortunes}
for f in "$CHECK" "$DATA_TOOL"; do [[ -x "$f" ]] || { echo "FAIL: $f is not built" >&2; exit 1; }; done
[[ -e "$CORPUS" ]] || { echo "FAIL: corpus $CORPUS is missing (Debian: fortunes-min or fortunes)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$DATA_TOOL" -q -o "$tmp/f.tok" "$CORPUS" >/dev/null

status=0
run() {
  local np=$1
  shift
  echo "== parallel_check (np=$np) $*"
  # shellcheck disable=SC2086
  $MPIRUN -n "$np" "$CHECK" "$@" --data "$tmp/f.tok" || status=1
}

common=(comm --b 1 --s 8 --set model.n_layers=2 --set model.vocab=512)
run 2 "${common[@]}" --max-ratio 0.27 \
  --case preset=tiny,mode=btp --case preset=tiny,mode=vanilla --case preset=llama-tiny,mode=megatron \
  --case preset=cola-60m,mode=btp --case preset=cola-60m,mode=vanilla --case preset=llama-60m,mode=megatron
# tp = 4: btp's volume does not grow with tp; the others' formulas hold too.
run 4 "${common[@]}" --max-ratio 0.27 \
  --case preset=tiny,mode=btp --case preset=tiny,mode=vanilla --case preset=llama-tiny,mode=megatron
# Activation recompute re-runs each layer's forward in backward: lowrank under
# btp reuses the saved bottleneck and adds no collective; full, vanilla with
# lowrank (B outputs all-reduced again) and full-rank layers repeat the
# forward's all-reduces.
run 2 "${common[@]}" \
  --case preset=tiny,mode=btp,recompute=lowrank --case preset=tiny,mode=btp,recompute=full \
  --case preset=tiny,mode=vanilla,recompute=lowrank --case preset=tiny,mode=vanilla,recompute=full \
  --case preset=llama-tiny,mode=megatron,recompute=lowrank --case preset=llama-tiny,mode=megatron,recompute=full

[[ $status == 0 ]] || echo "FAIL: communication volume (see the FAIL lines above)" >&2
exit $status
