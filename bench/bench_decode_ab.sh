#!/usr/bin/env bash
# Decode before and after, side by side: two builds' boost-generate on the
# same checkpoint, fp32 and bf16, interleaved round by round (old fp32, new
# fp32, old bf16, new bf16), with the bf16/fp32 ratio of each build and the
# load average -- on a shared machine only ratios measured together mean
# anything.
#
#   bash bench/bench_decode_ab.sh OLD_BUILD NEW_BUILD WORKDIR [ROUNDS] [THREADS] [MODEL]
#
# WORKDIR holds the checkpoints bench/bench_generate.sh leaves there
# (bash bench/bench_generate.sh WORKDIR makes them: cola-60m and llama-60m,
# model.seq_len 512); ROUNDS default 3, THREADS 1, MODEL llama-60m. Each run
# generates 256 tokens greedily after one prompt token (boost-generate
# --json's tokens_per_s).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: bench_decode_ab.sh OLD_BUILD NEW_BUILD WORKDIR [ROUNDS] [THREADS] [MODEL]" >&2; exit 2; }
old=$1/tools/boost-generate new=$2/tools/boost-generate work=$3
rounds=${4:-3} threads=${5:-1} model=${6:-llama-60m}
for g in "$old" "$new"; do [ -x "$g" ] || { echo "bench_decode_ab: $g not built" >&2; exit 2; }; done
[ -e "$work/$model/latest" ] || { echo "bench_decode_ab: no checkpoint $work/$model (run bench/bench_generate.sh $work)" >&2; exit 2; }
rate() { # rate BINARY PRECISION: tokens/s
  "$1" --json --tokens 0 --max-new-tokens 256 --temperature 0 --threads "$threads" --precision "$2" "$work/$model" \
    2>/dev/null | python3 -c 'import json, sys; print("%.1f" % json.load(sys.stdin)["tokens_per_s"])'
}
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $model, $threads thread(s), 256 new tokens"
for _ in $(seq "$rounds"); do
  of=$(rate "$old" fp32) nf=$(rate "$new" fp32) ob=$(rate "$old" bf16) nb=$(rate "$new" bf16)
  python3 -c 'import sys; of, nf, ob, nb = map(float, sys.argv[1:5])
print("before fp32 %6.1f bf16 %6.1f (%.2fx) | after fp32 %6.1f bf16 %6.1f (%.2fx) | load %s"
      % (of, ob, ob / of, nf, nb, nb / nf, open("/proc/loadavg").read().split()[0]))' "$of" "$nf" "$ob" "$nb"
done
