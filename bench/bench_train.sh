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
# Shared machines: every run records how many cores *other* processes kept
# busy while it ran (/proc/stat minus the run's own CPU time). Each config is
# run BENCH_REPEAT times per side (interleaved), and the table shows, per
# side, the run with the least other load; runs above 0.1 core are flagged.
# The sgemm peak is measured at the start and at the end; the higher counts.
#
# Environment (all optional):
#   BENCH_CONFIGS      space-separated preset:batch:seq list
#                      (default "cola-60m:4:256 llama-60m:4:256 cola-60m:4:64 llama-60m:4:64")
#   BENCH_LARGE=1      also cola-130m:4:256 and llama-130m:4:256 (adds ~5 min per repeat on 2 cores)
#   BENCH_REPEAT       runs per config and side (default 2)
#   BENCH_THREADS      threads for both sides (default 2)
#   BENCH_BOOST_STEPS  boost-train steps per run (default 8; median over steps > 2)
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
# sgemm.{start,end}.json, and per run the boost log + metrics, the torch JSON,
# and the /usr/bin/time records. Exit status: 0 all runs succeeded, 1 some run
# failed or boost-train is missing (the table still shows the rest), 2 setup
# error.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "bench_train: build folder '${1:-$ROOT/build}' not found" >&2; exit 2; }

THREADS=${BENCH_THREADS:-2}
CONFIGS=${BENCH_CONFIGS:-"cola-60m:4:256 llama-60m:4:256 cola-60m:4:64 llama-60m:4:64"}
[ "${BENCH_LARGE:-0}" = 1 ] && CONFIGS="$CONFIGS cola-130m:4:256 llama-130m:4:256"
REPEAT=${BENCH_REPEAT:-2}
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

for v in THREADS REPEAT BOOST_STEPS TORCH_STEPS TORCH_WARMUP WAIT_IDLE; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
[ "$THREADS" -ge 1 ] || die "BENCH_THREADS must be >= 1"
[ "$REPEAT" -ge 1 ] || die "BENCH_REPEAT must be >= 1"
[ "$TORCH_STEPS" -ge 1 ] || die "BENCH_TORCH_STEPS must be >= 1"
[ "$BOOST_STEPS" -ge 3 ] || die "BENCH_BOOST_STEPS must be >= 3 (the first 2 steps are not counted)"
[ -x "$SGEMM" ] || die "$SGEMM not found: build it with 'cmake --build $BUILD --target sgemm-peak'"
[ -x "$TIME" ] || die "$TIME not found (Debian package 'time')"
"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch (Debian: python3-torch for /usr/bin/python3)"
mkdir -p "$OUT" || die "cannot create $OUT"

# --- same OpenBLAS kernel on both sides ------------------------------------
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  CORE_HOW="OPENBLAS_CORETYPE set by the user"
else
  core=$("$SGEMM" --print-core) || die "sgemm-peak --print-core failed"
  [ -n "$core" ] || die "sgemm-peak --print-core printed nothing"
  export OPENBLAS_CORETYPE=$core
  CORE_HOW="picked by sgemm-peak, i.e. the project's OpenBLAS auto-selection, and exported"
fi
log "OpenBLAS core $OPENBLAS_CORETYPE ($CORE_HOW)"

# --- load on the machine -------------------------------------------------------
# Busy jiffies of the whole machine so far (user..steal minus idle, iowait).
busy_jiffies() {
  local a; a=($(head -1 /proc/stat))
  echo $(( a[1] + a[2] + a[3] + a[6] + a[7] + a[8] ))
}
# Percent of all CPU time busy over the next second.
cpu_busy() {
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  local idle=$(( (b[4] + b[5]) - (a[4] + a[5]) )) total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
  [ "$total" -gt 0 ] && echo $(( 100 * (total - idle) / total )) || echo 0
}
# Before a run: note (and optionally wait out) other load on the machine.
BUSY=0
check_idle() {
  local waited=0
  BUSY=$(cpu_busy)
  while [ "$BUSY" -gt 10 ] && [ "$waited" -lt "$WAIT_IDLE" ]; do
    sleep 4; waited=$((waited + 5)); BUSY=$(cpu_busy)
  done
  [ "$BUSY" -gt 10 ] && warn "CPUs ${BUSY}% busy before '$1' (other processes)"
}
# timed NAME CMD...: runs CMD with stdout to NAME.out, stderr to NAME.err,
# /usr/bin/time to NAME.time and "exit busy% jiffies-before jiffies-after"
# to NAME.status. Returns CMD's exit status.
timed() {
  local name=$1; shift
  local j0; j0=$(busy_jiffies)
  "$TIME" -f '%M %e %U %S' -o "$name.time" "$@" > "$name.out" 2> "$name.err"
  local rc=$?
  echo "$rc $BUSY $j0 $(busy_jiffies)" > "$name.status"
  return $rc
}

sgemm_run() { # start|end
  log "sgemm peak ($1) with $THREADS threads"
  check_idle "sgemm-peak $1"
  timed "$OUT/sgemm.$1" "$SGEMM" --threads "$THREADS" || die "sgemm-peak failed: $(tail -3 "$OUT/sgemm.$1.err")"
  cp "$OUT/sgemm.$1.out" "$OUT/sgemm.$1.json"
}
sgemm_run start

# --- boost side: data shard ----------------------------------------------------
BOOST_OK=1
BOOST_WHY=
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
run_boost() { # preset batch seq run-name
  local preset=$1 batch=$2 seq=$3 name=$4
  [ "$BOOST_OK" = 1 ] || return 0
  check_idle "boost ${name##*/}"
  log "boost-train ${name##*/} ($BOOST_STEPS steps)"
  rm -f "$name.metrics.jsonl"
  timed "$name" "$TRAIN" --config "$OUT/bench.ini" \
    --set model.preset="$preset" --set model.seq_len="$seq" --set train.batch_size="$batch" \
    --set train.steps="$BOOST_STEPS" --set train.warmup_steps=0 --set train.lr=1e-3 \
    --set train.threads="$THREADS" --set data.train="$DATA" \
    --set train.val_every=0 --set train.val_batches=0 \
    --set train.metrics="$name.metrics.jsonl" --set train.out_dir="$name.run"
  local rc=$?
  if [ $rc -ne 0 ]; then
    FAILED=1
    warn "boost-train ${name##*/} failed (exit $rc); last lines of $name.out / .err:"
    tail -3 "$name.out" | sed 's/^/    /' >&2
    tail -3 "$name.err" | sed 's/^/    /' >&2
  fi
}

run_torch() { # preset batch seq run-name
  local preset=$1 batch=$2 seq=$3 name=$4
  [ "${BENCH_SKIP_TORCH:-0}" = 1 ] && return 0
  check_idle "torch ${name##*/}"
  log "torch peer ${name##*/} ($TORCH_WARMUP + $TORCH_STEPS steps)"
  timed "$name" "$PY" "$PEER" --preset "$preset" --batch "$batch" --seq "$seq" \
    --steps "$TORCH_STEPS" --warmup "$TORCH_WARMUP" --threads "$THREADS" --json
  local rc=$?
  if [ $rc -ne 0 ]; then
    FAILED=1
    warn "torch peer ${name##*/} failed (exit $rc):"
    tail -5 "$name.err" | sed 's/^/    /' >&2
  fi
}

TAGS=()
for cfg in $CONFIGS; do
  IFS=: read -r preset batch seq <<< "$cfg"
  [[ -n $preset && $batch =~ ^[0-9]+$ && $seq =~ ^[0-9]+$ ]] || die "bad BENCH_CONFIGS entry '$cfg' (want preset:batch:seq)"
  TAGS+=("$preset-b$batch-t$seq")
done
for ((rep = 1; rep <= REPEAT; rep++)); do
  for cfg in $CONFIGS; do
    IFS=: read -r preset batch seq <<< "$cfg"
    tag="$preset-b$batch-t$seq"
    run_boost "$preset" "$batch" "$seq" "$OUT/$tag.r$rep.boost"
    run_torch "$preset" "$batch" "$seq" "$OUT/$tag.r$rep.torch"
  done
done
sgemm_run end

# --- report --------------------------------------------------------------------
"$PY" - "$OUT" "$THREADS" "$REPEAT" "$OPENBLAS_CORETYPE" "$CORE_HOW" "$BOOST_WHY" "$(getconf CLK_TCK)" "${TAGS[@]}" <<'EOF'
import json, os, re, statistics, sys

out, threads, repeat, core, core_how, boost_why, clk_tck = sys.argv[1:8]
tags, repeat, clk_tck = sys.argv[8:], int(repeat), float(clk_tck)
LOADED = 0.1  # cores of other load above which a run is flagged

def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None

def fmt(v, spec, missing="—"):
    return missing if v is None else format(v, spec)

def run_info(name):
    """exit status, busy % before, other load (cores), peak RSS MiB of one timed run, or None."""
    st = read(name + ".status")
    if not st:
        return None
    rc, busy, j0, j1 = (int(x) for x in st.split())
    rss = elapsed = cpu = None
    for line in reversed((read(name + ".time") or "").splitlines()):
        f = line.split()
        if len(f) == 4:
            try:
                rss, elapsed, cpu = int(f[0]) / 1024, float(f[1]), float(f[2]) + float(f[3])
                break
            except ValueError:
                pass
    load = None
    if elapsed and elapsed > 0:
        load = max(0.0, ((j1 - j0) / clk_tck - cpu) / elapsed)
    return {"rc": rc, "busy_before_pct": busy, "other_load_cores": load, "rss_mib": rss, "elapsed_s": elapsed}

problems = []

# sgemm peak: the higher of the start and end measurements
peak, sgemm_runs = 0.0, {}
for when in ("start", "end"):
    info = run_info(os.path.join(out, "sgemm." + when))
    try:
        sj = json.loads(read(os.path.join(out, f"sgemm.{when}.json")))
    except (TypeError, ValueError):
        continue
    sj.update(info or {})
    sgemm_runs[when] = sj
    peak = max(peak, sj["sgemm_gflops"])
if not sgemm_runs:
    sys.exit("bench_train: no sgemm-peak result")
if all((s.get("other_load_cores") or 0) > LOADED for s in sgemm_runs.values()):
    problems.append("sgemm-peak: other processes used the CPUs in both measurements (" +
                    ", ".join(f"{w} {fmt(s.get('other_load_cores'), '.2f')} cores" for w, s in sgemm_runs.items()) +
                    "): the peak is too low")

def boost_run(name):
    info = run_info(name)
    if info is None:
        return None
    if info["rc"] != 0:
        info["error"] = f"boost-train failed (exit {info['rc']}), see {os.path.basename(name)}.out/.err"
        return info
    steps = []
    for line in (read(name + ".metrics.jsonl") or "").splitlines():
        try:
            steps.append(json.loads(line))
        except ValueError:
            pass
    steps = [s for s in steps if s.get("step", 0) > 2]
    if not steps:
        info["error"] = "boost-train wrote no metrics for steps > 2"
        return info
    info["tokens_per_s"] = statistics.median(s["tokens_per_s"] for s in steps)
    info["gflops"] = statistics.median(s["gflops"] for s in steps)
    info["step_ms"] = statistics.median(s["step_ms"] for s in steps)
    info["steps_counted"] = len(steps)
    log = read(name + ".out") or ""
    mc = re.search(r"OpenBLAS core (\S+)", log)
    info["openblas_core"] = mc.group(1) if mc else None
    mp = re.search(r"([0-9.]+)([kMG]?) parameters", log)
    info["params_m"] = float(mp.group(1)) * {"": 1e-6, "k": 1e-3, "M": 1.0, "G": 1e3}[mp.group(2)] if mp else None
    return info

torch_blas = set()
def torch_run(name):
    info = run_info(name)
    if info is None:
        return None
    if info["rc"] != 0:
        info["error"] = f"torch peer failed (exit {info['rc']}), see {os.path.basename(name)}.err"
        return info
    try:
        tj = json.loads((read(name + ".out") or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        info["error"] = "torch peer printed no JSON"
        return info
    info.update(tokens_per_s=tj["tokens_per_s"], gflops=tj["gflops"], step_ms=tj["step_ms"],
                params_m=tj["params"] / 1e6, openblas_core=tj.get("openblas_core"),
                steps_contended=tj.get("steps_contended"), tokens_per_s_quiet=tj.get("tokens_per_s_quiet"))
    info["rss_mib"] = info["rss_mib"] or tj["peak_rss_kib"] / 1024
    torch_blas.add((tj.get("torch_blas_info"), tj.get("openblas_config"),
                    ", ".join(p for p in tj.get("blas_libs_loaded", []) if "blas" in os.path.basename(p))))
    return info

def pick(runs):
    """The successful run with the least other load (then the fastest)."""
    ok = [r for r in runs if r and "tokens_per_s" in r]
    if not ok:
        return None
    return min(ok, key=lambda r: (round(r["other_load_cores"] if r["other_load_cores"] is not None else 9, 1),
                                  -r["tokens_per_s"]))

rows = []
for tag in tags:
    m = re.match(r"(.+)-b(\d+)-t(\d+)$", tag)
    row = {"config": tag, "preset": m.group(1), "batch": int(m.group(2)), "seq": int(m.group(3)),
           "threads": int(threads), "openblas_core": core, "sgemm_peak_gflops": peak}
    for side, reader in (("boost", boost_run), ("torch", torch_run)):
        runs = [reader(os.path.join(out, f"{tag}.r{i}.{side}")) for i in range(1, repeat + 1)]
        row[side + "_runs"] = [r for r in runs if r]
        for r in runs:
            if r and "error" in r:
                problems.append(f"{tag}: {r['error']}")
        best = pick(runs)
        if best is None:
            continue
        for k in ("tokens_per_s", "gflops", "step_ms", "rss_mib", "other_load_cores", "params_m", "openblas_core"):
            row[f"{side}_{k}"] = best.get(k)
        oc = best.get("openblas_core")
        if not oc:
            problems.append(f"{tag}: {side} " + ("does not use OpenBLAS (no openblas_get_corename in the process)"
                                                 if side == "torch" else "did not report its OpenBLAS core"))
        elif oc.lower() != core.lower():
            problems.append(f"{tag}: {side} ran OpenBLAS core {oc}, not {core}")
        if best["other_load_cores"] is None or best["other_load_cores"] > LOADED:
            problems.append(f"{tag}: every {side} run shared the CPUs with other processes (least "
                            f"{fmt(best['other_load_cores'], '.2f')} cores): its numbers are unreliable")
    if "boost_tokens_per_s" in row and "torch_tokens_per_s" in row:
        row["ratio"] = row["boost_tokens_per_s"] / row["torch_tokens_per_s"]
    if "boost_gflops" in row and peak > 0:
        row["boost_peak_fraction"] = row["boost_gflops"] / peak
    bp, tp = row.get("boost_params_m"), row.get("torch_params_m")
    if bp is not None and tp is not None and abs(bp - tp) > 0.006 * max(bp, tp):
        problems.append(f"{tag}: parameter counts differ: boost {bp}M, torch {tp:.2f}M")
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
sg = sgemm_runs.get("start") or sgemm_runs.get("end")
lines = [f"Machine: {cpu}, {os.cpu_count()} CPUs; {threads} threads per side; OpenBLAS core {core} ({core_how}); "
         f"sgemm peak {peak:.1f} GFLOP/s (best over 2048³ and the model's GEMM shapes; start/end: " +
         " / ".join(f"{s['sgemm_gflops']:.1f}" for s in sgemm_runs.values()) + ")."]
for info, cfg, libs in sorted(torch_blas, key=str):
    lines.append(f"PyTorch BLAS: torch.__config__ says BLAS_INFO={info}; loaded {libs}; {cfg or 'no OpenBLAS found'}.")
lines += ["",
          "| config | boost tok/s | torch tok/s | boost/torch | boost GFLOP/s | of sgemm peak | torch GFLOP/s "
          "| boost RSS MiB | torch RSS MiB | other load (cores) |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for r in rows:
    frac = r.get("boost_peak_fraction")
    lines.append("| {} B={} T={} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} |".format(
        r["preset"], r["batch"], r["seq"],
        fmt(r.get("boost_tokens_per_s"), ".1f"), fmt(r.get("torch_tokens_per_s"), ".1f"),
        fmt(r.get("ratio"), ".2f") + ("×" if "ratio" in r else ""),
        fmt(r.get("boost_gflops"), ".1f"), fmt(None if frac is None else 100 * frac, ".0f") + ("%" if frac else ""),
        fmt(r.get("torch_gflops"), ".1f"),
        fmt(r.get("boost_rss_mib"), ".0f"), fmt(r.get("torch_rss_mib"), ".0f"),
        fmt(r.get("boost_other_load_cores"), ".2f"), fmt(r.get("torch_other_load_cores"), ".2f")))
lines += ["",
          f"tok/s: median over boost-train steps 3.. and over the torch peer's timed steps; per side the least "
          f"loaded of {repeat} run(s). GFLOP/s: model FLOPs (6 per weight per token + causal attention, boost's "
          "count) per second. RSS: /usr/bin/time %M. Other load: cores other processes kept busy during the "
          "run (boost / torch), should be ~0."]
if boost_why:
    lines.append(f"boost side not run: {boost_why}")
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
[ "$FAILED" = 0 ] || exit 1
[ "$BOOST_OK" = 1 ] || [ "${BENCH_SKIP_BOOST:-0}" = 1 ] || exit 1
exit 0
