#!/usr/bin/env bash
# boost-train against the PyTorch a user would install (issue 10).
#
#   bash bench/bench_vs_torch.sh [BUILD_DIR]        (default BUILD_DIR: ./build)
#
# The peer is the current PyTorch wheel from the package index, installed by
# bench/install_peer.sh (not by CI) into a virtual environment outside the
# repository (BENCH_TORCH_VENV, default /opt/boost-peer; BENCH_TORCH_VERSION,
# default 2.15.0), run in
# three modes of bench/torch_peer.py -- eager (explicit attention, AdamW
# foreach), fast (scaled_dot_product_attention + fused AdamW) and compile
# (fast + torch.compile) -- next to Debian's PyTorch (python3-torch, eager)
# when /usr/bin/python3 has it. Same model, optimizer, batch, sequence length
# and thread count on both sides, one after the other on the same machine.
#
# Per configuration (preset:batch:seq, BENCH_CONFIGS) one table row: tokens/s
# of boost (median of steps 3..) and of each peer column (median of timed
# steps), boost over the best PyTorch column, boost's model GFLOP/s as a
# fraction of the GEMM limit: the best rate the library boost's step runs
# on reaches on the step's own shapes (bench/sgemm-peak: OpenBLAS's sgemm
# for fp32 rows, with --bf16 boost's gemm_bf16 -- oneDNN -- for bf16 rows),
# measured right before each boost run: this VM's speed drifts by 10-15%
# within a run, so a limit taken once at the start misstates the fraction
# for runs made later), and peak RSS of boost
# and of the best PyTorch column (/usr/bin/time). Then data parallelism:
# boost 1 rank vs mpirun -n 2 (dp=2), one thread per rank, against PyTorch
# DDP (gloo) with one and two processes in the fast mode; the scaling is
# tokens/s at 2 over tokens/s at 1.
#
# Precisions (BENCH_PRECISIONS, default "fp32 bf16"): each configuration
# runs in each; bf16 is boost's train.precision=bf16 against the same
# PyTorch modes with the forward and loss under torch.autocast("cpu",
# dtype=torch.bfloat16), and its row adds boost bf16 over boost fp32 of the
# same round. The peers' JSON records the instruction set PyTorch
# dispatched to (cpu_capability); boost's start-up line "backend:" which
# instructions its bf16 GEMMs ran (kept in each run's .out file).
#
# Environment (optional): BENCH_CONFIGS (default "cola-60m:4:256
# llama-60m:4:256 cola-60m:4:1024 llama-60m:4:1024 cola-130m:4:256"),
# BENCH_MODES (default "eager fast compile"), BENCH_DP_CONFIG (default
# cola-60m:4:256; empty: no dp rows), BENCH_THREADS (2), BENCH_BOOST_STEPS
# (8), BENCH_TORCH_STEPS (6), BENCH_TORCH_WARMUP (2; compile mode adds 2 for
# compilation), BENCH_ROUNDS (1: every configuration is run that many times,
# the sides interleaved; each cell is then the median over rounds, and the
# per-round ratios are listed under the table, since on a shared VM the
# spread between rounds can exceed the margins being measured), BENCH_OUT
# (results folder). Exit status 0 when every run
# succeeded, 1 when some failed (the table shows the rest), 2 on setup error.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" 2>/dev/null && pwd) || { echo "bench_vs_torch: build folder not found" >&2; exit 2; }
CONFIGS=${BENCH_CONFIGS:-"cola-60m:4:256 llama-60m:4:256 cola-60m:4:1024 llama-60m:4:1024 cola-130m:4:256"}
MODES=${BENCH_MODES:-"eager fast compile"}
PRECISIONS=${BENCH_PRECISIONS:-"fp32 bf16"}
DP_CONFIG=${BENCH_DP_CONFIG-cola-60m:4:256}
THREADS=${BENCH_THREADS:-2}
BOOST_STEPS=${BENCH_BOOST_STEPS:-8}
TORCH_STEPS=${BENCH_TORCH_STEPS:-6}
TORCH_WARMUP=${BENCH_TORCH_WARMUP:-2}
ROUNDS=${BENCH_ROUNDS:-1}
VENV=${BENCH_TORCH_VENV:-/opt/boost-peer}
TORCH_VERSION=${BENCH_TORCH_VERSION:-2.15.0}
OUT=${BENCH_OUT:-$BUILD/bench-vs-torch/$(date +%Y%m%d-%H%M%S)}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
TRAIN=$BUILD/trainer/boost-train
PEER=$ROOT/bench/torch_peer.py

die() { echo "bench_vs_torch: $*" >&2; exit 2; }
log() { echo "bench_vs_torch: $*" >&2; }
[ -x "$TRAIN" ] || die "$TRAIN not built (bash scripts/build.sh)"
[ -x "$BUILD/bench/sgemm-peak" ] || die "$BUILD/bench/sgemm-peak not built"
[ -x /usr/bin/time ] || die "/usr/bin/time not found (Debian package 'time')"
mkdir -p "$OUT" || die "cannot create $OUT"

BOOST_PEER_TORCH=$TORCH_VERSION bash "$ROOT/bench/install_peer.sh" "$VENV" >/dev/null ||
  die "could not install the PyTorch peer into $VENV (bench/install_peer.sh)"
WHEEL_PY=$VENV/bin/python
DEBIAN_PY=
/usr/bin/python3 -c "import torch" 2>/dev/null && DEBIAN_PY=/usr/bin/python3

export OMP_NUM_THREADS=$THREADS
"$BUILD/tools/boost-data" -q -o "$OUT/f.tok" /usr/share/games/fortunes >/dev/null || die "boost-data failed"
"$BUILD/bench/sgemm-peak" --threads "$THREADS" >"$OUT/sgemm.json" 2>/dev/null || die "sgemm-peak failed"

FAILED=0
# run NAME CMD...: stdout/stderr to NAME.out/.err, peak RSS (KiB) to NAME.rss.
run() {
  local name=$1
  shift
  /usr/bin/time -f %M -o "$OUT/$name.rss" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" ||
    { log "run $name failed: $(tail -2 "$OUT/$name.err")"; FAILED=1; }
}
boost() { # name preset batch seq np threads [precision]
  local name=$1 preset=$2 batch=$3 seq=$4 np=$5 threads=$6 prec=${7:-fp32} launcher=()
  [ "$np" -gt 1 ] && launcher=($MPIRUN -n "$np")
  log "boost $name"
  OMP_NUM_THREADS=$threads run "$name" "${launcher[@]}" "$TRAIN" --set model.preset="$preset" --set data.train="$OUT/f.tok" \
    --set model.seq_len="$seq" --set train.batch_size="$batch" --set train.steps="$BOOST_STEPS" --set train.threads="$threads" \
    --set train.val_batches=0 --set parallel.dp="$np" --set train.precision="$prec" --set train.metrics="$OUT/$name.jsonl"
}
torch_run() { # name python mode preset batch seq threads ddp [precision]
  local name=$1 py=$2 mode=$3 preset=$4 batch=$5 seq=$6 threads=$7 ddp=$8 prec=${9:-fp32} warm=$TORCH_WARMUP
  [ "$mode" = compile ] && warm=$((warm + 2))
  log "torch $name"
  OMP_NUM_THREADS=$threads run "$name" "$py" "$PEER" --preset "$preset" --batch "$batch" --seq "$seq" --steps "$TORCH_STEPS" \
    --warmup "$warm" --threads "$threads" --mode "$mode" --ddp "$ddp" --precision "$prec" --json
}

TAGS=()
for c in $CONFIGS; do
  IFS=: read -r preset batch seq <<<"$c"
  TAGS+=("$preset-b$batch-t$seq")
done
# Round r's files end in .rR (round 1: no suffix, as with BENCH_ROUNDS=1).
for round in $(seq "$ROUNDS"); do
  r=
  [ "$round" -gt 1 ] && r=.r$round
  for c in $CONFIGS; do
    IFS=: read -r preset batch seq <<<"$c"
    tag="$preset-b$batch-t$seq"
    for prec in $PRECISIONS; do
      pt=$tag
      [ "$prec" = fp32 ] || pt=$tag.$prec
      bf16_flag=() # a bf16 row's limit: the same shapes on gemm_bf16, the library boost's bf16 step runs on
      [ "$prec" = bf16 ] && bf16_flag=(--bf16)
      "$BUILD/bench/sgemm-peak" --threads "$THREADS" "${bf16_flag[@]}" >"$OUT/$pt.boost$r.sgemm.json" 2>/dev/null ||
        rm -f "$OUT/$pt.boost$r.sgemm.json"
      boost "$pt.boost$r" "$preset" "$batch" "$seq" 1 "$THREADS" "$prec"
      [ -n "$DEBIAN_PY" ] && [ "$prec" = fp32 ] && torch_run "$pt.debian-eager$r" "$DEBIAN_PY" eager "$preset" "$batch" "$seq" "$THREADS" 1
      for m in $MODES; do torch_run "$pt.wheel-$m$r" "$WHEEL_PY" "$m" "$preset" "$batch" "$seq" "$THREADS" 1 "$prec"; done
    done
  done
  if [ -n "$DP_CONFIG" ]; then
    IFS=: read -r preset batch seq <<<"$DP_CONFIG"
    boost "dp.boost1$r" "$preset" "$batch" "$seq" 1 1
    boost "dp.boost2$r" "$preset" "$batch" "$seq" 2 1
    torch_run "dp.torch1$r" "$WHEEL_PY" fast "$preset" "$batch" "$seq" 1 1
    torch_run "dp.torch2$r" "$WHEEL_PY" fast "$preset" "$batch" "$seq" 1 2
  fi
done

"$WHEEL_PY" - "$OUT" "$MODES" "${DEBIAN_PY:+debian}" "$DP_CONFIG" "$ROUNDS" "$PRECISIONS" "${TAGS[@]}" <<'EOF'
import json, os, statistics, sys
out, modes, debian, dp_config, rounds = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4], int(sys.argv[5])
precisions, base_tags = sys.argv[6].split(), sys.argv[7:]
# a row per configuration and precision: fp32 files keep the plain tag
tags = [t if p == "fp32" else f"{t}.{p}" for t in base_tags for p in precisions]
SFX = [""] + [f".r{k}" for k in range(2, rounds + 1)]
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def rss(name):
    try: return int(open(f"{out}/{name}.rss").read().split()[-1]) / 1024
    except (OSError, ValueError, IndexError): return None
def boost(name):
    try: rows = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
    except OSError: return None, None
    rows = [r for r in rows if r.get("step", 0) > 2]
    if not rows: return None, None
    return statistics.median(r["tokens_per_s"] for r in rows), statistics.median(r["gflops"] for r in rows)
def torch(name):
    try:
        for line in open(f"{out}/{name}.out"):
            if line.startswith("{"): return json.loads(line)
    except OSError: pass
    return None
def boost_tps(name):  # median over rounds of each round's median step rate, and the same for GFLOP/s
    got = [boost(name + x) for x in SFX]
    return med(g[0] for g in got), med(g[1] for g in got)
def torch_tps(name):
    return med(((torch(name + x) or {}).get("tokens_per_s")) for x in SFX)
def peak_of(path):
    try:
        p = json.load(open(path))
        return max(p.get("sgemm_gflops", 0), p.get("bf16_gflops", 0), p.get("square_gflops", 0)) or None
    except (OSError, ValueError): return None
peak_gf = peak_of(f"{out}/sgemm.json")
def efficiency(name):  # boost's GFLOP/s over the sgemm peak measured right before it (the run's first peak if missing)
    gf, pk = boost(name)[1], peak_of(f"{out}/{name}.sgemm.json") or peak_gf
    return gf / pk if gf and pk else None
cols = (["debian-eager"] if debian else []) + [f"wheel-{m}" for m in modes]
def backend_line(name):  # boost's own line on what ran its GEMMs
    try:
        return next((l.strip() for l in open(f"{out}/{name}.out") if l.startswith("backend:")), None)
    except OSError:
        return None
info = next((torch(f"{t}.wheel-{m}") for t in tags for m in modes if torch(f"{t}.wheel-{m}")), None)
lines = [f"cpu: {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}, "
         f"{os.cpu_count()} cores; sgemm peak {peak_gf:.0f} GFLOP/s at the start (each boost run's own peak is measured right before it)",
         f"PyTorch wheel: {info['torch_version'] if info else '?'}, BLAS {info.get('torch_blas_info') if info else '?'}",
         f"PyTorch dispatch: {info.get('cpu_capability', '?') if info else '?'}"]
for p in precisions:
    t = next((x for x in tags if x.endswith("." + p) or (p == "fp32" and "." not in x)), None)
    lines.append(f"boost {p}: {backend_line(t + '.boost') if t else None}")
lines += ["", "| config | boost tok/s | " + " | ".join(f"{c} tok/s" for c in cols) +
         " | boost / best PyTorch | boost GFLOP/s (of the GEMM limit next to it) | RSS MiB boost / best PyTorch | bf16 / boost fp32 |",
         "|---" * (6 + len(cols)) + "|"]
per_round = []
for t in tags:
    btps, bgf = boost_tps(f"{t}.boost")
    vals = {c: torch_tps(f"{t}.{c}") for c in cols}
    fp32_tag = t.rsplit(".", 1)[0] if "." in t else None  # a bf16 row's fp32 twin
    over_fp32 = None
    if fp32_tag:
        rr = [(boost(f"{t}.boost{x}")[0], boost(f"{fp32_tag}.boost{x}")[0]) for x in SFX]
        over_fp32 = med(a / b if a and b else None for a, b in rr)
    best = max((c for c in cols if vals[c]), key=lambda c: vals[c], default=None)
    f = lambda x, p=0: "n/a" if x is None else f"{x:.{p}f}"
    cells = [f(vals[c]) for c in cols]
    ratio = btps / vals[best] if btps and best else None
    eff = med(efficiency(f"{t}.boost{x}") for x in SFX)
    if rounds > 1 and best:
        rr, ee = [], []
        for x in SFX:
            b, p = boost(f"{t}.boost{x}")[0], (torch(f"{t}.{best}{x}") or {}).get("tokens_per_s")
            rr.append(f"{b / p:.2f}x" if b and p else "n/a")
            e = efficiency(f"{t}.boost{x}")
            ee.append(f"{100 * e:.0f}%" if e else "n/a")
        per_round.append(f"- {t}: boost / {best} per round: " + ", ".join(rr) + "; of the GEMM limit: " + ", ".join(ee))
    lines.append(f"| {t} | {f(btps)} | " + " | ".join(cells) + f" | **{f(ratio, 2)}x** ({best or '-'}) | "
                 f"{f(bgf)} ({f(100 * eff if eff else None)}%) | {f(rss(t + '.boost'))} / {f(rss(t + '.' + best) if best else None)} | "
                 f"{f(over_fp32, 2) + 'x' if over_fp32 else '-'} |")
if per_round:
    lines += ["", f"{rounds} rounds, sides interleaved; the cells are medians over rounds:"] + per_round
if dp_config:
    b1, _ = boost_tps("dp.boost1"); b2, _ = boost_tps("dp.boost2")
    t1, t2 = torch_tps("dp.torch1"), torch_tps("dp.torch2")
    s = lambda a, b: "n/a" if not a or not b else f"{b / a:.2f}x"
    lines += ["", f"data parallel, {dp_config} per rank, one thread per rank:", "",
              "| | 1 rank tok/s | 2 ranks tok/s | scaling |", "|---|---|---|---|",
              f"| boost (mpirun -n 2, dp=2) | {b1 and round(b1)} | {b2 and round(b2)} | {s(b1, b2)} |",
              f"| PyTorch DDP gloo (fast) | {t1 and round(t1)} | {t2 and round(t2)} | {s(t1, t2)} |"]
text = "\n".join(lines)
print(text)
open(f"{out}/results.md", "w").write(text + "\n")
EOF
exit $FAILED
