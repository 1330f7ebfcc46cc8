#!/usr/bin/env bash
# Where oneDNN spends the bf16 step's GEMM time, by implementation: runs N
# training steps under ONEDNN_VERBOSE and prints, per implementation oneDNN
# picked (gemm:jit, brg:avx512_core_bf16, brg:avx512_core_amx, ...), its
# share of oneDNN's summed execution time and its calls per step, then the
# shapes and layouts that took the most time outside brgemm (the kernels
# that use the matrix engine and AVX512-BF16 at full width), with their
# source/weight/destination layouts: oneDNN 3.x prints a strided operand's
# strides there (e.g. blocked:ab:384x1 for a 128-wide slice of 384-wide
# rows); oneDNN 2.6 prints no strides.
#
#   bash bench/bench_onednn_share.sh [BUILD] [--config PRESET:B:T] [--steps N]
#        [--precision P] [--top K] [--keep LOG]
#   bash bench/bench_onednn_share.sh --parse LOG [--steps N] [--top K]
#
# BUILD (default build/) holds trainer/boost-train; --config defaults to
# cola-60m:4:256 (vocab 320: the byte-level fortunes corpus), --steps to 8,
# --precision to bf16, --top to 8 rows, 2 threads (THREADS). --parse reads a
# log already written (the trainer's output with oneDNN's verbose lines,
# either version's format) instead of running; its steps come from the
# log's step lines, or --steps. --keep copies the run's log to LOG.
# The tok/s printed is the median of steps 2.. under verbose (slower than
# without: compare shares, and tok/s only between runs of this script).
# Exit status 0; 1 when the run failed or the log holds no oneDNN execution
# lines (a build without oneDNN, or fp32); 2 on bad arguments.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build config=cola-60m:4:256 steps="" precision=bf16 top=8 parse="" keep=""
usage_error() { echo "bench_onednn_share: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --config | --steps | --precision | --top | --parse | --keep)
      [ $# -ge 2 ] || usage_error "$1 wants a value (see --help)"
      case "$1" in
        --config) [[ "$2" =~ ^[a-z0-9-]+:[0-9]+:[0-9]+$ ]] || usage_error "--config wants PRESET:BATCH:SEQ like cola-60m:4:256, got '$2'"
          config=$2 ;;
        --steps) [[ "$2" =~ ^[1-9][0-9]*$ ]] || usage_error "--steps wants a positive whole number, got '$2'"
          steps=$2 ;;
        --top) [[ "$2" =~ ^[0-9]+$ ]] || usage_error "--top wants a whole number, got '$2'"
          top=$2 ;;
        --precision) precision=$2 ;;
        --parse) [ -f "$2" ] || usage_error "--parse: no file '$2'"
          parse=$2 ;;
        --keep) keep=$2 ;;
      esac
      shift 2 ;;
    -*) usage_error "unknown argument '$1' (see --help)" ;;
    *) [ -d "$1" ] || usage_error "no build directory '$1'"
      build=$(cd "$1" && pwd); shift ;;
  esac
done

log=$parse
if [ -z "$parse" ]; then
  train=$build/trainer/boost-train
  [ -x "$train" ] || { echo "bench_onednn_share: $train is not built (bash scripts/build.sh)" >&2; exit 1; }
  IFS=: read -r preset batch seq <<<"$config"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/onednn_share.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  "$build/tools/boost-data" -q -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null ||
    { echo "bench_onednn_share: boost-data could not make the corpus" >&2; exit 1; }
  log=$tmp/run.log
  threads=${THREADS:-2}
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $(grep -o -w -E 'amx_bf16|avx512_bf16|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "run: $preset B$batch T$seq $precision, ${steps:=8} steps, $threads threads, $build"
  ONEDNN_VERBOSE=1 OMP_NUM_THREADS=$threads "$train" --set model.preset="$preset" --set model.vocab=320 \
    --set data.train="$tmp/f.tok" --set model.seq_len="$seq" --set train.batch_size="$batch" --set train.steps="$steps" \
    --set train.threads="$threads" --set train.val_batches=0 --set train.precision="$precision" >"$log" 2>&1 ||
    { echo "bench_onednn_share: boost-train failed: $(grep -v verbose "$log" | tail -1)" >&2; exit 1; }
  [ -z "$keep" ] || cp "$log" "$keep"
fi
exec /usr/bin/python3 "$root/bench/onednn_share.py" "$log" "${steps:-0}" "$top"
