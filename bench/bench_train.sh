#!/usr/bin/env bash
# Training throughput of boost-train vs the PyTorch CPU peer (issue 2).
#
#   bash bench/bench_train.sh [BUILD_DIR]          (default BUILD_DIR: ./build)
#
# Needs BUILD_DIR/bench/sgemm-peak, BUILD_DIR/trainer/boost-train and
# BUILD_DIR/tools/boost-data (cmake --build BUILD_DIR --target sgemm-peak
# boost-train boost-data), /usr/bin/time, and Debian's /usr/bin/python3 with
# python3-torch. For every configuration it runs boost-train and
# bench/torch_peer.py one after the other on the same machine, with the same
# thread count and the same OpenBLAS kernel, and prints a table:
# tokens/s of both, their ratio, boost's model GFLOP/s and its fraction of the
# measured sgemm peak, and the peak RSS of both (from /usr/bin/time -f %M).
#
# Environment (all optional):
#   BENCH_CONFIGS      space-separated preset:batch:seq list
#                      (default "cola-60m:4:256 llama-60m:4:256 cola-60m:4:64 llama-60m:4:64")
#   BENCH_LARGE=1      also cola-130m:4:256 and llama-130m:4:256 (adds ~10 min on 2 cores)
#   BENCH_THREADS      threads for both sides (default 2)
#   BENCH_BOOST_STEPS  boost-train steps per config (default 8; median over steps > 2)
#   BENCH_TORCH_STEPS  timed torch steps (default 6), BENCH_TORCH_WARMUP untimed ones (default 2)
#   BENCH_SKIP_BOOST=1 / BENCH_SKIP_TORCH=1   run one side only
#   BENCH_DATA         token shard for boost-train (default: made from /usr/share/games/fortunes)
#   BENCH_OUT          results folder (default BUILD_DIR/bench-train/YYYYmmdd-HHMMSS)
#   BENCH_PYTHON       python with torch (default /usr/bin/python3)
#   BENCH_WAIT_IDLE=S  before each run wait up to S seconds for the CPUs to be idle
#   BENCH_UPDATE_DOC=1 write the table into docs/PERFORMANCE.md between the
#                      "bench_train:begin/end" markers
#   OPENBLAS_CORETYPE  if set, both sides use it; if unset, the core that
#                      sgemm-peak runs with (the project's auto-selection) is
#                      exported so that the PyTorch peer, whose OpenBLAS loads
#                      before any code of ours, uses the same kernel.
#
# Output: the table on stdout, and in BENCH_OUT: results.md, results.jsonl,
# sgemm.json, and per config the boost log + metrics, the torch JSON, and the
# /usr/bin/time records. Exit status: 0 all runs succeeded, 1 some run failed
# (the table still shows the others), 2 setup error.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "bench_train: build folder '${1:-$ROOT/build}' not found" >&2; exit 2; }

THREADS=${BENCH_THREADS:-2}
CONFIGS=${BENCH_CONFIGS:-"cola-60m:4:256 llama-60m:4:256 cola-60m:4:64 llama-60m:4:64"}
[ "${BENCH_LARGE:-0}" = 1 ] && CONFIGS="$CONFIGS cola-130m:4:256 llama-130m:4:256"
BOOST_STEPS=${BENCH_BOOST_STEPS:-8}
TORCH_STEPS=${BENCH_TORCH_STEPS:-6}
TORCH_WARMUP=${BENCH_TORCH_WARMUP:-2}
PY=${BENCH_PYTHON:-/usr/bin/python3}
OUT=${BENCH_OUT:-$BUILD/bench-train/$(date +%Y%m%d-%H%M%S)}
WAIT_IDLE=${BENCH_WAIT_IDLE:-0}

SGEMM=$BUILD/bench/sgemm-peak
TRAIN=$BUILD/trainer/boost-train
DATA_TOOL=$BUILD/tools/boost-data
PEER=$ROOT/bench/torch_peer.py
TIME=/usr/bin/time

die() { echo "bench_train: $*" >&2; exit 2; }
warn() { echo "bench_train: WARNING: $*" >&2; }
log() { echo "bench_train: $*" >&2; }

for v in THREADS BOOST_STEPS TORCH_STEPS TORCH_WARMUP WAIT_IDLE; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
[ "$THREADS" -ge 1 ] || die "BENCH_THREADS must be >= 1"
[ "$BOOST_STEPS" -ge 3 ] || die "BENCH_BOOST_STEPS must be >= 3 (the first 2 steps are not counted)"
[ -x "$SGEMM" ] || die "$SGEMM not found: build it with 'cmake --build $BUILD --target sgemm-peak'"
[ -x "$TIME" ] || die "$TIME not found (Debian package 'time')"
"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch (Debian: python3-torch for /usr/bin/python3)"
mkdir -p "$OUT" || die "cannot create $OUT"
: > "$OUT/results.jsonl"

# --- same OpenBLAS kernel on both sides ------------------------------------
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  CORE_HOW="OPENBLAS_CORETYPE set by the user"
else
  core=$("$SGEMM" --print-core) || die "sgemm-peak --print-core failed"
  [ -n "$core" ] || die "sgemm-peak --print-core printed nothing"
  export OPENBLAS_CORETYPE=$core
  CORE_HOW="picked by sgemm-peak (the project's OpenBLAS auto-selection) and exported"
fi
log "OpenBLAS core $OPENBLAS_CORETYPE ($CORE_HOW)"

# Fraction of CPU time (percent) spent busy over the next second, all CPUs.
cpu_busy() {
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  local idle=$(( (b[4] + b[5]) - (a[4] + a[5]) )) total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
  [ "$total" -gt 0 ] && echo $(( 100 * (total - idle) / total )) || echo 0
}
# Busy jiffies of the whole machine so far (user..steal minus idle, iowait).
busy_jiffies() {
  local a; a=($(head -1 /proc/stat))
  echo $(( a[1] + a[2] + a[3] + a[6] + a[7] + a[8] ))
}
# Before a run: note (and optionally wait out) other load on the machine.
BUSY=0
check_idle() {
  local waited=0
  BUSY=$(cpu_busy)
  while [ "$BUSY" -gt 10 ] && [ "$waited" -lt "$WAIT_IDLE" ]; do
    sleep 4; waited=$((waited + 5)); BUSY=$(cpu_busy)
  done
  [ "$BUSY" -gt 10 ] && warn "CPUs ${BUSY}% busy before '$1' (other processes): its numbers are not reliable"
}

# --- sgemm peak --------------------------------------------------------------
log "measuring the sgemm peak with $THREADS threads"
check_idle sgemm-peak
SGEMM_BUSY=$BUSY
"$SGEMM" --threads "$THREADS" > "$OUT/sgemm.json" 2> "$OUT/sgemm.err" || die "sgemm-peak failed: $(tail -3 "$OUT/sgemm.err")"
PEAK=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["sgemm_gflops"])' "$OUT/sgemm.json") ||
  die "cannot read sgemm_gflops from $OUT/sgemm.json"
SGEMM_CORE=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["openblas_core"])' "$OUT/sgemm.json")
log "sgemm peak $PEAK GFLOP/s (core $SGEMM_CORE)"

# --- boost side: data shard ----------------------------------------------------
BOOST_OK=1
if [ "${BENCH_SKIP_BOOST:-0}" = 1 ]; then
  BOOST_OK=0; BOOST_WHY="skipped (BENCH_SKIP_BOOST=1)"
elif [ ! -x "$TRAIN" ]; then
  BOOST_OK=0; BOOST_WHY="$TRAIN not found (cmake --build $BUILD --target boost-train)"
elif [ -n "${BENCH_DATA:-}" ]; then
  [ -r "$BENCH_DATA" ] || die "BENCH_DATA '$BENCH_DATA' not readable"
  DATA=$BENCH_DATA
elif [ ! -x "$DATA_TOOL" ]; then
  BOOST_OK=0; BOOST_WHY="$DATA_TOOL not found (cmake --build $BUILD --target boost-data), or set BENCH_DATA"
else
  DATA=$OUT/fortunes.tok
  if ! "$DATA_TOOL" -o "$DATA" /usr/share/games/fortunes > "$OUT/boost-data.log" 2>&1; then
    BOOST_OK=0; BOOST_WHY="boost-data failed: $(tail -2 "$OUT/boost-data.log" | tr '\n' ' ')"
  fi
fi
[ "$BOOST_OK" = 1 ] || warn "boost side not run: $BOOST_WHY"
printf '# boost-train benchmark config (values come from --set)\n[model]\npreset = tiny\n' > "$OUT/bench.ini"

FAILED=0
run_boost() { # preset batch seq tag
  local preset=$1 batch=$2 seq=$3 tag=$4
  [ "$BOOST_OK" = 1 ] || return 0
  check_idle "boost $tag"
  log "boost-train $tag ($BOOST_STEPS steps)"
  rm -f "$OUT/$tag.boost.jsonl"
  local j0; j0=$(busy_jiffies)
  "$TIME" -f '%M %e %U %S' -o "$OUT/$tag.boost.time" "$TRAIN" --config "$OUT/bench.ini" \
    --set model.preset="$preset" --set model.seq_len="$seq" --set train.batch_size="$batch" \
    --set train.steps="$BOOST_STEPS" --set train.warmup_steps=0 --set train.lr=1e-3 \
    --set train.threads="$THREADS" --set data.train="$DATA" \
    --set train.val_every=0 --set train.val_batches=0 \
    --set train.metrics="$OUT/$tag.boost.jsonl" --set train.out_dir="$OUT/$tag.boost.run" \
    > "$OUT/$tag.boost.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    FAILED=1
    warn "boost-train $tag failed (exit $rc); last lines of $OUT/$tag.boost.log:"
    tail -5 "$OUT/$tag.boost.log" | sed 's/^/    /' >&2
  fi
  echo "$rc $BUSY $j0 $(busy_jiffies)" > "$OUT/$tag.boost.status"
}

run_torch() { # preset batch seq tag
  local preset=$1 batch=$2 seq=$3 tag=$4
  [ "${BENCH_SKIP_TORCH:-0}" = 1 ] && return 0
  check_idle "torch $tag"
  log "torch peer $tag ($TORCH_WARMUP + $TORCH_STEPS steps)"
  local j0; j0=$(busy_jiffies)
  "$TIME" -f '%M %e %U %S' -o "$OUT/$tag.torch.time" "$PY" "$PEER" --preset "$preset" --batch "$batch" --seq "$seq" \
    --steps "$TORCH_STEPS" --warmup "$TORCH_WARMUP" --threads "$THREADS" --json \
    > "$OUT/$tag.torch.json" 2> "$OUT/$tag.torch.err"
  local rc=$?
  if [ $rc -ne 0 ]; then
    FAILED=1
    warn "torch peer $tag failed (exit $rc):"
    tail -5 "$OUT/$tag.torch.err" | sed 's/^/    /' >&2
  fi
  echo "$rc $BUSY $j0 $(busy_jiffies)" > "$OUT/$tag.torch.status"
}

TAGS=()
for cfg in $CONFIGS; do
  IFS=: read -r preset batch seq <<< "$cfg"
  [[ -n $preset && $batch =~ ^[0-9]+$ && $seq =~ ^[0-9]+$ ]] || die "bad BENCH_CONFIGS entry '$cfg' (want preset:batch:seq)"
  tag="$preset-b$batch-t$seq"
  TAGS+=("$tag")
  run_boost "$preset" "$batch" "$seq" "$tag"
  run_torch "$preset" "$batch" "$seq" "$tag"
done

# --- report --------------------------------------------------------------------
"$PY" - "$OUT" "$PEAK" "$THREADS" "$OPENBLAS_CORETYPE" "$CORE_HOW" "$SGEMM_BUSY" "${BOOST_WHY:-}" "$(getconf CLK_TCK)" "${TAGS[@]}" <<'EOF'
import json, os, re, statistics, sys

out, peak, threads, core, core_how, sgemm_busy, boost_why, clk_tck = sys.argv[1:9]
tags = sys.argv[9:]
clk_tck = float(clk_tck)
peak = float(peak)
sg = json.load(open(os.path.join(out, "sgemm.json")))

def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None

def timed(path):
    """/usr/bin/time -f '%M %e %U %S': (peak RSS MiB, elapsed s, CPU s) or Nones."""
    for line in reversed((read(path) or "").splitlines()):
        f = line.split()
        if len(f) == 4:
            try:
                return int(f[0]) / 1024, float(f[1]), float(f[2]) + float(f[3])
            except ValueError:
                pass
    return None, None, None

def status(path):
    """(exit status, % busy before, jiffies busy before, after) or Nones."""
    t = read(path)
    if not t:
        return None, 0, None, None
    rc, busy, j0, j1 = t.split()
    return int(rc), int(busy), int(j0), int(j1)

def other_load(st, tm):
    """Cores that other processes kept busy on average during the run."""
    _, _, j0, j1 = st
    _, elapsed, cpu = tm
    if j0 is None or elapsed is None or elapsed <= 0:
        return None
    return max(0.0, ((j1 - j0) / clk_tck - cpu) / elapsed)

def fmt(v, spec, missing="—"):
    return missing if v is None else format(v, spec)

rows, problems, torch_blas = [], [], set()
for tag in tags:
    m = re.match(r"(.+)-b(\d+)-t(\d+)$", tag)
    row = {"config": tag, "preset": m.group(1), "batch": int(m.group(2)), "seq": int(m.group(3)),
           "threads": int(threads), "openblas_core": core, "sgemm_peak_gflops": peak}
    # boost: median over steps after the first 2
    st = status(os.path.join(out, tag + ".boost.status"))
    rc, busy = st[0], st[1]
    tm = timed(os.path.join(out, tag + ".boost.time"))
    row["boost_cpu_busy_before_pct"] = busy
    row["boost_other_load_cores"] = other_load(st, tm)
    if rc == 0:
        steps = []
        for line in (read(os.path.join(out, tag + ".boost.jsonl")) or "").splitlines():
            try:
                steps.append(json.loads(line))
            except ValueError:
                pass
        steps = [s for s in steps if s.get("step", 0) > 2]
        if steps:
            row["boost_tokens_per_s"] = statistics.median(s["tokens_per_s"] for s in steps)
            row["boost_gflops"] = statistics.median(s["gflops"] for s in steps)
            row["boost_step_ms"] = statistics.median(s["step_ms"] for s in steps)
            row["boost_steps_counted"] = len(steps)
            row["boost_rss_mib"] = tm[0]
        else:
            problems.append(f"{tag}: boost-train wrote no metrics for steps > 2")
        log = read(os.path.join(out, tag + ".boost.log")) or ""
        mc = re.search(r"OpenBLAS core (\S+)", log)
        row["boost_openblas_core"] = mc.group(1) if mc else None
        if mc and mc.group(1).lower() != core.lower():
            problems.append(f"{tag}: boost-train ran OpenBLAS core {mc.group(1)}, not {core}")
        mp = re.search(r"([0-9.]+)M parameters", log)
        if mp:
            row["boost_params_m"] = float(mp.group(1))
    elif rc is not None:
        problems.append(f"{tag}: boost-train failed (exit {rc}), see {tag}.boost.log")
    # torch
    st = status(os.path.join(out, tag + ".torch.status"))
    rc, busy = st[0], st[1]
    tm = timed(os.path.join(out, tag + ".torch.time"))
    row["torch_cpu_busy_before_pct"] = busy
    row["torch_other_load_cores"] = other_load(st, tm)
    if rc == 0:
        try:
            tj = json.loads(read(os.path.join(out, tag + ".torch.json")).strip().splitlines()[-1])
        except (AttributeError, ValueError, IndexError):
            tj = None
            problems.append(f"{tag}: torch peer printed no JSON")
        if tj:
            row["torch_tokens_per_s"] = tj["tokens_per_s"]
            row["torch_gflops"] = tj["gflops"]
            row["torch_step_ms"] = tj["step_ms"]
            row["torch_params_m"] = tj["params"] / 1e6
            row["torch_rss_mib"] = tm[0] or tj["peak_rss_kib"] / 1024
            row["torch_steps_contended"] = tj.get("steps_contended")
            row["torch_tokens_per_s_quiet"] = tj.get("tokens_per_s_quiet")
            row["torch_openblas_core"] = tj.get("openblas_core")
            row["torch_blas"] = tj.get("openblas_config") or ("BLAS_INFO=" + tj.get("torch_blas_info", "?"))
            torch_blas.add((tj.get("torch_blas_info"), tj.get("openblas_config"),
                            ", ".join(p for p in tj.get("blas_libs_loaded", []) if "blas" in os.path.basename(p))))
            if not tj.get("openblas_core"):
                problems.append(f"{tag}: torch does not use OpenBLAS (no openblas_get_corename in the process)")
            elif tj["openblas_core"].lower() != core.lower():
                problems.append(f"{tag}: torch ran OpenBLAS core {tj['openblas_core']}, not {core}")
    elif rc is not None:
        problems.append(f"{tag}: torch peer failed (exit {rc}), see {tag}.torch.err")
    if "boost_tokens_per_s" in row and "torch_tokens_per_s" in row:
        row["ratio"] = row["boost_tokens_per_s"] / row["torch_tokens_per_s"]
    if "boost_gflops" in row:
        row["boost_peak_fraction"] = row["boost_gflops"] / peak
    if "boost_params_m" in row and "torch_params_m" in row and abs(row["boost_params_m"] - row["torch_params_m"]) > 0.01:
        problems.append(f"{tag}: parameter counts differ: boost {row['boost_params_m']}M, torch {row['torch_params_m']:.2f}M")
    loads = [row[k] for k in ("boost_other_load_cores", "torch_other_load_cores") if row.get(k) is not None]
    if max(row["boost_cpu_busy_before_pct"], row["torch_cpu_busy_before_pct"]) > 10 or (loads and max(loads) > 0.1):
        bl, tl = row.get("boost_other_load_cores"), row.get("torch_other_load_cores")
        problems.append(f"{tag}: other processes used the CPUs (before: boost {row['boost_cpu_busy_before_pct']}%, "
                        f"torch {row['torch_cpu_busy_before_pct']}%; average during: boost "
                        f"{fmt(bl, '.2f')} cores, torch {fmt(tl, '.2f')} cores): numbers unreliable")
    rows.append(row)

with open(os.path.join(out, "results.jsonl"), "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")

cpu = "?"
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
lines = []
lines.append(f"Machine: {cpu}, {os.cpu_count()} CPUs; {threads} threads per side; OpenBLAS core "
             f"{core} ({core_how}); sgemm peak {peak:.1f} GFLOP/s "
             f"(square {sg.get('square_n')}³ {sg.get('square_gflops')} GFLOP/s; best over model GEMM shapes).")
for info, cfg, libs in sorted(torch_blas, key=str):
    lines.append(f"PyTorch BLAS: torch.__config__ says BLAS_INFO={info}; loaded {libs}; {cfg or 'no OpenBLAS found'}.")
lines.append("")
lines.append("| config | boost tok/s | torch tok/s | boost/torch | boost GFLOP/s | of sgemm peak | torch GFLOP/s "
             "| boost RSS MiB | torch RSS MiB | other load (cores) |")
lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    lines.append("| {} B={} T={} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} |".format(
        r["preset"], r["batch"], r["seq"],
        fmt(r.get("boost_tokens_per_s"), ".1f"), fmt(r.get("torch_tokens_per_s"), ".1f"),
        fmt(r.get("ratio"), ".2f") + ("×" if "ratio" in r else ""),
        fmt(r.get("boost_gflops"), ".1f"),
        fmt(None if "boost_peak_fraction" not in r else 100 * r["boost_peak_fraction"], ".0f") +
        ("%" if "boost_peak_fraction" in r else ""),
        fmt(r.get("torch_gflops"), ".1f"),
        fmt(r.get("boost_rss_mib"), ".0f"), fmt(r.get("torch_rss_mib"), ".0f"),
        fmt(r.get("boost_other_load_cores"), ".2f"), fmt(r.get("torch_other_load_cores"), ".2f")))
lines.append("")
lines.append("tok/s: median over boost steps 3.. and over the torch peer's timed steps; GFLOP/s: model FLOPs "
             "(6 per weight per token + causal attention, boost's count) per second; RSS: /usr/bin/time %M; "
             "other load: cores other processes kept busy during the run (from /proc/stat), should be ~0.")
if boost_why:
    lines.append(f"boost side not run: {boost_why}")
if int(sgemm_busy) > 10:
    problems.append(f"other processes kept the CPUs {sgemm_busy}% busy during sgemm-peak")
for p in problems:
    lines.append(f"WARNING: {p}")
text = "\n".join(lines) + "\n"
with open(os.path.join(out, "results.md"), "w") as f:
    f.write(text)
print(text, end="")
EOF
[ $? -eq 0 ] || { echo "bench_train: report failed" >&2; exit 2; }

if [ "${BENCH_UPDATE_DOC:-0}" = 1 ]; then
  DOC=$ROOT/docs/PERFORMANCE.md
  if grep -q '<!-- bench_train:begin -->' "$DOC" 2>/dev/null && grep -q '<!-- bench_train:end -->' "$DOC"; then
    "$PY" - "$DOC" "$OUT/results.md" "$(date -u +%Y-%m-%dT%H:%MZ)" "$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null)" <<'EOF'
import sys
doc, res, when, commit = sys.argv[1:5]
text = open(doc).read()
a = text.index("<!-- bench_train:begin -->") + len("<!-- bench_train:begin -->")
b = text.index("<!-- bench_train:end -->")
block = f"\nLast run: {when}, commit {commit or '?'}, `bash bench/bench_train.sh`.\n\n" + open(res).read() + "\n"
open(doc, "w").write(text[:a] + block + text[b:])
EOF
    log "updated $DOC"
  else
    warn "no bench_train:begin/end markers in $DOC: not updated"
  fi
fi
log "results in $OUT"
[ "$FAILED" = 0 ] && [ "$BOOST_OK" = 1 -o "${BENCH_SKIP_BOOST:-0}" = 1 ] || exit 1
exit 0
