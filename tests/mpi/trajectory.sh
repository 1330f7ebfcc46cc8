# Bit-identical training trajectory: the tiny preset trained 8 steps on five
# layouts (1 process on 1 and on 2 threads, tp=2 btp, pp=2 with 2
# micro-batches, dp=2 with ZeRO-1) must give exactly -- bit for bit -- the
# losses, gradient norms, final weights and AdamW moments of the reference
# trainer (commit $REFERENCE_COMMIT: first the tree before the model/kernel
# seam refactor; since issue 10 the commit that split the projection GEMMs
# over the trainer's own threads, a deliberate change of rounding). The fingerprint of a run is tests/trajectory/fingerprint.py:
# float.hex of each step's loss and grad norm, SHA-256 of every tensor of
# the final checkpoint read through h5py.
#
# Floating-point results depend on the CPU (OpenBLAS picks a kernel per CPU,
# -march=native) and the compiler, so a recorded reference only holds on the
# machine kind and build configuration that recorded it:
# tests/trajectory/reference-<signature>.txt. Elsewhere (another CPU, a
# sanitizer build) the test builds the reference commit from git history, in
# the same configuration, into a scratch directory and fingerprints it here. Without either it skips
# (exit 77) saying why.
#
#   bash tests/mpi/trajectory.sh            the test (ctest: mpi_trajectory)
#   bash tests/mpi/trajectory.sh --record   write this machine's reference
#                                           (only from the reference tree!)
# A deliberate change of the numerics (summation order, a new kernel) must
# move REFERENCE_COMMIT to the commit that makes it and re-record, saying why
# in the commit message.
set -euo pipefail
REFERENCE_COMMIT=b0f85cee7458ee1466d81b0aceafbf12e5016c6f

fail() { echo "FAIL: $*" >&2; exit 1; }
B=${BOOST_BINARY_DIR:?BOOST_BINARY_DIR must point at the build directory}
SRC=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
PY=/usr/bin/python3 # Debian's h5py and numpy belong to this interpreter
export HDF5_PLUGIN_PATH=${HDF5_PLUGIN_PATH:-$B/hdf5-plugins}
"$PY" -c 'import h5py, numpy' 2>/dev/null || fail "h5py/numpy not importable by $PY (Debian: python3-h5py)"

# The build configuration under test (a Debug/sanitizer build rounds
# differently from a Release one: different code, same maths).
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$B/CMakeCache.txt" 2>/dev/null | head -n 1; }
build_type=$(cache_value CMAKE_BUILD_TYPE)
sanitize=$(cache_value BOOST_SANITIZE)
build_type=${build_type:-Release}
sanitize=${sanitize:-OFF}

signature() { # CPU model, its feature flags, the compiler and the build configuration: what the bits depend on
  { grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; cc --version | head -n 1
    [ "$build_type/$sanitize" = Release/OFF ] || echo "$build_type/$sanitize"; } | sha256sum | cut -c1-12
}
sig=$(signature)
ref_file=$SRC/tests/trajectory/reference-$sig.txt

tmp=$(mktemp -d "${TMPDIR:-/tmp}/boost_trajectory.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
awk -f "$SRC/tests/trajectory/gen_corpus.awk" >"$tmp/corpus.txt"

# fingerprint_all BUILD_DIR OUT: every layout's fingerprint, one block each.
fingerprint_all() {
  local bd=$1 out=$2 name np train=$1/trainer/boost-train
  [ -x "$train" ] || train=$bd/run/boost-train # builds from when the loop was in run/
  "$bd/tools/boost-data" -q --fortune-split -o "$tmp/corpus.tok" "$tmp/corpus.txt" >/dev/null ||
    fail "boost-data of the generated corpus"
  : >"$out"
  local common=(--set model.preset=tiny --set model.seq_len=64 --set data.train="$tmp/corpus.tok"
    --set train.batch_size=2 --set train.steps=8 --set train.warmup_steps=3 --set train.lr=3e-3
    --set train.grad_clip=1.0 --set train.val_batches=0 --set train.log_every=1 --set ckpt.every=8)
  while read -r name np threads sets; do
    local dir=$tmp/run-$name
    rm -rf "$dir"
    mkdir -p "$dir"
    # shellcheck disable=SC2086 # sets is a list of --set arguments
    local cmd=("$train" "${common[@]}" --set train.threads="$threads"
      --set train.metrics="$dir/metrics.jsonl" --set ckpt.dir="$dir/ck" $sets)
    if [ "$np" = 1 ]; then
      OMP_NUM_THREADS=$threads "${cmd[@]}" </dev/null >"$dir/log" 2>&1 || fail "$name: $(tail -n 3 "$dir/log")"
    else
      # shellcheck disable=SC2086 # MPIRUN is a command line
      OMP_NUM_THREADS=$threads $MPIRUN -n "$np" "${cmd[@]}" </dev/null >"$dir/log" 2>&1 || fail "$name: $(tail -n 3 "$dir/log")"
    fi
    echo "== $name" >>"$out"
    "$PY" "$SRC/tests/trajectory/fingerprint.py" "$dir/metrics.jsonl" "$dir/ck/step_00000008.h5" >>"$out" ||
      fail "$name: fingerprint"
  done <<'LAYOUTS'
single 1 1
single-2threads 1 2
tp2-btp 2 1 --set parallel.tp=2 --set parallel.tp_mode=btp
pp2 2 1 --set parallel.pp=2 --set train.grad_accum=2
dp2-zero1 2 1 --set parallel.dp=2 --set parallel.zero=1
LAYOUTS
}

if [ "${1:-}" = --record ]; then
  fingerprint_all "$B" "$ref_file"
  echo "recorded $(grep -c '^== ' "$ref_file") layouts into $ref_file"
  exit 0
fi

if [ ! -f "$ref_file" ]; then
  # No reference recorded on this machine kind: build the reference tree here.
  if ! git -C "$SRC" cat-file -e "$REFERENCE_COMMIT^{commit}" 2>/dev/null; then
    echo "SKIP: no reference recorded for this CPU/compiler ($sig) and commit $REFERENCE_COMMIT is not in $SRC's git history"
    exit 77
  fi
  echo "no reference recorded for signature $sig: building $REFERENCE_COMMIT"
  mkdir "$tmp/ref-src"
  git -C "$SRC" archive "$REFERENCE_COMMIT" | tar -x -C "$tmp/ref-src"
  cmake -S "$tmp/ref-src" -B "$tmp/ref-build" -DCMAKE_BUILD_TYPE="$build_type" -DBOOST_SANITIZE="$sanitize" \
    -DBOOST_CUDA=OFF >"$tmp/ref-cmake.log" 2>&1 ||
    fail "configuring the reference tree: $(tail -n 5 "$tmp/ref-cmake.log")"
  cmake --build "$tmp/ref-build" -j"$(nproc)" --target boost-train boost-data >"$tmp/ref-build.log" 2>&1 ||
    fail "building the reference tree: $(tail -n 5 "$tmp/ref-build.log")"
  ref_file=$tmp/reference.txt
  fingerprint_all "$tmp/ref-build" "$ref_file"
fi

fingerprint_all "$B" "$tmp/now.txt"
n=$(grep -c '^== ' "$ref_file")
[ "$n" -ge 5 ] || fail "reference $ref_file has $n layouts, expected 5"
[ "$(grep -c ' loss ' "$ref_file")" -ge 40 ] || fail "reference has fewer than 40 step records"
if ! diff -u "$ref_file" "$tmp/now.txt" >"$tmp/diff"; then
  head -n 40 "$tmp/diff"
  fail "training is not bit-identical to the reference ($(grep -c '^[-+][st]' "$tmp/diff") differing lines)"
fi
echo "PASS: $n layouts bit-identical to the reference ($(grep -c ' loss ' "$ref_file") steps, $(grep -c '^tensor ' "$ref_file") tensors)"
