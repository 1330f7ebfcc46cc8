#!/usr/bin/env bash
# Tensor parallelism: btp vs vanilla (low-rank CoLA) vs megatron (full-rank
# twin) — issue 3's benchmark.
#
#   bash bench/bench_tp.sh [BUILD_DIR]          (default BUILD_DIR: ./build)
#
# Needs BUILD_DIR/trainer/boost-train and BUILD_DIR/tools/boost-data
# (cmake --build BUILD_DIR --target boost-train boost-data), mpirun (Open MPI),
# python3 (standard library only) and /usr/bin/time.
#
# What it runs, one mpirun per configuration (dp = pp = 1, -n tp):
#   for each shape in cola-60m, cola-130m and each tp in 2, 4:
#     btp      on the low-rank model (cola-*)
#     vanilla  on the low-rank model (Megatron mapping per factor)
#     megatron on the full-rank twin (llama-*, same d/heads/ffn/layers)
#     btp with parallel.recompute=lowrank (cola-60m only: bytes must not change)
#   then, on one process with one thread, cola-60m at its default shape
#   (batch 4 x seq 256) with parallel.recompute=none and =lowrank: activation
#   memory per layer (from the start-up line) and the cost of recompute, as
#   wall time per step and as CPU time per step ((CPU of a K-step run - CPU of
#   a 1-step run) / (K - 1), from /usr/bin/time: steps 2..K, without start-up
#   and the first step's page faults; with one thread and no MPI this hardly
#   depends on what else runs on the machine).
# For each run it reads train.metrics (one JSON line per step, rank 0's
# counters) and reports: tp all-reduce bytes and calls per step, the bytes
# expected from the per-layer formulas (and whether they match exactly), the
# per-layer volume derived from the total, the median step time (first step
# not counted), and the ratios btp/vanilla and btp/megatron within this run.
#
# Environment (all optional):
#   BENCH_SEQ          model.seq_len of the tp runs (default 64)
#   BENCH_BATCH        train.batch_size of the tp runs (default 2)
#   BENCH_STEPS        steps per tp run (default 5; steps >= 2 are timed)
#   BENCH_TPS          tp degrees (default "2 4"; set but empty: no tp runs,
#                      e.g. only the recompute runs)
#   BENCH_SHAPES       default "60m 130m"
#   BENCH_LAYERS_130M  model.n_layers for the 130m shapes (default 4; the preset
#                      has 12 — fewer keeps the run short, per-layer figures
#                      do not depend on it)
#   BENCH_LAYERS_60M   model.n_layers for the 60m shapes (default: preset, 8)
#   BENCH_ROUNDS       rounds over the modes (default 3); even rounds run the
#                      modes in reverse order (ABC CBA ...), and the timed
#                      steps of all rounds pool into one median (and min):
#                      on a shared machine this spreads other load evenly
#   BENCH_RC_STEPS     steps of each recompute run at 4 x 256 (default 3; 0 = skip)
#   BENCH_RC_THREADS   train.threads of the recompute runs (default 1)
#   BENCH_FWD_CHECK    1 (default): per shape, at the first tp, one 1-step run
#                      per mode with parallel.recompute=full, whose backward
#                      replays the forward's all-reduces: bytes(full) -
#                      bytes(none) is the forward volume alone, checked
#                      against the per-layer forward formulas; 0 = skip
#   BENCH_THREADS      train.threads (default 0: cores / ranks, at least 1)
#   BENCH_DATA         token shard (default: made from /usr/share/games/fortunes)
#   BENCH_OUT          results folder (default BUILD_DIR/bench-tp/YYYYmmdd-HHMMSS)
#   BENCH_PYTHON       python3 for the report (default python3)
#   BENCH_MPIRUN       launcher (default mpirun; as root --allow-run-as-root is
#                      added; --oversubscribe always)
#   BENCH_WAIT_IDLE=S  before each run wait up to S seconds for the CPUs to be
#                      idle (default 0: just record how busy they were)
#   BENCH_REPORT_ONLY=1  run nothing: rebuild the tables from BENCH_OUT
#
# Output: the tables on stdout (markdown), and in BENCH_OUT: results.md,
# results.jsonl, and per run its log and metrics. Exit status: 0 all runs
# succeeded (whatever the ratios), 1 some run failed (the tables show the
# others), 2 setup error.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "bench_tp: build folder '${1:-$ROOT/build}' not found" >&2; exit 2; }

SEQ=${BENCH_SEQ:-64}
BATCH=${BENCH_BATCH:-2}
STEPS=${BENCH_STEPS:-5}
TPS=${BENCH_TPS-"2 4"}
SHAPES=${BENCH_SHAPES:-"60m 130m"}
LAYERS_130M=${BENCH_LAYERS_130M:-4}
LAYERS_60M=${BENCH_LAYERS_60M:-}
ROUNDS=${BENCH_ROUNDS:-3}
RC_STEPS=${BENCH_RC_STEPS:-3}
RC_THREADS=${BENCH_RC_THREADS:-1}
FWD_CHECK=${BENCH_FWD_CHECK:-1}
THREADS=${BENCH_THREADS:-0}
WAIT_IDLE=${BENCH_WAIT_IDLE:-0}
PY=${BENCH_PYTHON:-python3}
MPIRUN=${BENCH_MPIRUN:-mpirun}
OUT=${BENCH_OUT:-$BUILD/bench-tp/$(date +%Y%m%d-%H%M%S)}

TRAIN=$BUILD/trainer/boost-train
DATA_TOOL=$BUILD/tools/boost-data
TIME=/usr/bin/time

die() { echo "bench_tp: $*" >&2; exit 2; }
warn() { echo "bench_tp: WARNING: $*" >&2; }
log() { echo "bench_tp: $*" >&2; }

for v in SEQ BATCH STEPS LAYERS_130M ROUNDS RC_STEPS RC_THREADS FWD_CHECK THREADS WAIT_IDLE; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
[ -z "$LAYERS_60M" ] || [[ $LAYERS_60M =~ ^[1-9][0-9]*$ ]] || die "BENCH_LAYERS_60M must be a positive integer"
[ "$STEPS" -ge 2 ] || die "BENCH_STEPS must be >= 2 (the first step is not counted)"
[ "$RC_STEPS" -eq 0 ] || [ "$RC_STEPS" -ge 2 ] || die "BENCH_RC_STEPS must be 0 or >= 2"
[ "$RC_THREADS" -ge 1 ] || die "BENCH_RC_THREADS must be >= 1"
[ "$ROUNDS" -ge 1 ] && [ "$SEQ" -ge 2 ] && [ "$BATCH" -ge 1 ] && [ "$LAYERS_130M" -ge 1 ] || die "bad BENCH_ROUNDS/SEQ/BATCH/LAYERS_130M"
for t in $TPS; do [[ $t =~ ^[1-9][0-9]*$ ]] || die "bad tp '$t' in BENCH_TPS"; done
for s in $SHAPES; do [[ $s == 60m || $s == 130m ]] || die "bad shape '$s' in BENCH_SHAPES (60m or 130m)"; done
[ -x "$TRAIN" ] || die "$TRAIN not found: cmake --build $BUILD --target boost-train"
[ -x "$TIME" ] || die "$TIME not found (Debian package 'time')"
command -v "$MPIRUN" > /dev/null || die "$MPIRUN not found"
"$PY" -c 'import json, statistics' 2> /dev/null || die "$PY cannot run (set BENCH_PYTHON)"
REPORT_ONLY=${BENCH_REPORT_ONLY:-0}
FAILED=0
if [ "$REPORT_ONLY" = 1 ]; then
  [ -r "$OUT/runs.txt" ] || die "BENCH_REPORT_ONLY=1 needs BENCH_OUT with a runs.txt"
  [ -r "$OUT/settings" ] && read -r SEQ BATCH STEPS ROUNDS < "$OUT/settings"
else
mkdir -p "$OUT" || die "cannot create $OUT"
: > "$OUT/runs.txt"
echo "$SEQ $BATCH $STEPS $ROUNDS" > "$OUT/settings"

MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" = 0 ] && MPI_FLAGS+=(--allow-run-as-root)

if [ -n "${BENCH_DATA:-}" ]; then
  [ -r "$BENCH_DATA" ] || die "BENCH_DATA '$BENCH_DATA' not readable"
  DATA=$BENCH_DATA
else
  [ -x "$DATA_TOOL" ] || die "$DATA_TOOL not found: cmake --build $BUILD --target boost-data (or set BENCH_DATA)"
  DATA=$OUT/fortunes.tok
  "$DATA_TOOL" -o "$DATA" /usr/share/games/fortunes > "$OUT/boost-data.log" 2>&1 ||
    die "boost-data failed: $(tail -2 "$OUT/boost-data.log" | tr '\n' ' ')"
fi

# Percent of CPU time spent busy over the next second, all CPUs.
cpu_busy() {
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  local idle=$(( (b[4] + b[5]) - (a[4] + a[5]) )) total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
  [ "$total" -gt 0 ] && echo $(( 100 * (total - idle) / total )) || echo 0
}
# Busy jiffies of the whole machine so far.
busy_jiffies() {
  local a; a=($(head -1 /proc/stat))
  echo $(( a[1] + a[2] + a[3] + a[6] + a[7] + a[8] ))
}
BUSY=0
check_idle() {
  local waited=0
  BUSY=$(cpu_busy)
  while [ "$BUSY" -gt 10 ] && [ "$waited" -lt "$WAIT_IDLE" ]; do
    sleep 4; waited=$((waited + 5)); BUSY=$(cpu_busy)
  done
  [ "$BUSY" -gt 10 ] && warn "CPUs ${BUSY}% busy before '$1' (other processes)"
}

FAILED=0
# run TAG NP PRESET MODE RECOMPUTE LAYERS BATCH SEQ STEPS [THREADS]
run() {
  local tag=$1 np=$2 preset=$3 mode=$4 rc_mode=$5 layers=$6 batch=$7 seq=$8 steps=$9 threads=${10:-$THREADS}
  local layer_set=()
  [ -n "$layers" ] && layer_set=(--set model.n_layers="$layers")
  check_idle "$tag"
  log "$tag: $preset tp=$np mode=$mode recompute=$rc_mode ${layers:+layers=$layers }batch=$batch seq=$seq steps=$steps"
  rm -f "$OUT/$tag.jsonl"
  local j0; j0=$(busy_jiffies)
  local cmd=("$TRAIN" --set model.preset="$preset" "${layer_set[@]}" --set model.seq_len="$seq"
    --set train.batch_size="$batch" --set train.steps="$steps" --set train.threads="$threads"
    --set data.train="$DATA" --set train.val_batches=0 --set train.val_every=0
    --set parallel.tp="$np" --set parallel.recompute="$rc_mode" --set train.metrics="$OUT/$tag.jsonl")
  [ "$mode" != none ] && cmd+=(--set parallel.tp_mode="$mode")
  [ "$np" -gt 1 ] && cmd=("$MPIRUN" "${MPI_FLAGS[@]}" -n "$np" "${cmd[@]}")
  echo "${cmd[*]}" > "$OUT/$tag.cmd"
  "$TIME" -f '%e %U %S' -o "$OUT/$tag.time" "${cmd[@]}" > "$OUT/$tag.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    FAILED=1
    warn "$tag failed (exit $rc); last lines of $OUT/$tag.log:"
    tail -5 "$OUT/$tag.log" | sed 's/^/    /' >&2
  fi
  # tag rc shape preset mode recompute tp layers batch seq busy% jiffies0 jiffies1 loadavg1
  echo "$tag $rc $preset $mode $rc_mode $np ${layers:-0} $batch $seq $BUSY $j0 $(busy_jiffies) $(cut -d' ' -f1 /proc/loadavg)" >> "$OUT/runs.txt"
}

T_START=$(date +%s)
for shape in $SHAPES; do
  layers=""
  [ "$shape" = 130m ] && layers=$LAYERS_130M
  [ "$shape" = 60m ] && layers=$LAYERS_60M
  for tp in $TPS; do
    modes=(btp vanilla megatron)
    [ "$shape" = 60m ] && modes+=(btp-lowrank)
    for ((round = 1; round <= ROUNDS; round++)); do
      order=("${modes[@]}")
      if [ $((round % 2)) = 0 ]; then order=(); for ((i = ${#modes[@]} - 1; i >= 0; i--)); do order+=("${modes[i]}"); done; fi
      for mode in "${order[@]}"; do
        case $mode in
          btp) run "cola-$shape-tp$tp-btp-r$round" "$tp" "cola-$shape" btp none "$layers" "$BATCH" "$SEQ" "$STEPS" ;;
          vanilla) run "cola-$shape-tp$tp-vanilla-r$round" "$tp" "cola-$shape" vanilla none "$layers" "$BATCH" "$SEQ" "$STEPS" ;;
          megatron) run "llama-$shape-tp$tp-megatron-r$round" "$tp" "llama-$shape" megatron none "$layers" "$BATCH" "$SEQ" "$STEPS" ;;
          btp-lowrank) run "cola-$shape-tp$tp-btp_lowrank-r$round" "$tp" "cola-$shape" btp lowrank "$layers" "$BATCH" "$SEQ" "$STEPS" ;;
        esac
      done
    done
  done
done
if [ "$FWD_CHECK" = 1 ] && [ -n "${TPS// /}" ]; then
  read -r tp _ <<< "$TPS"
  for shape in $SHAPES; do
    layers=""
    [ "$shape" = 130m ] && layers=$LAYERS_130M
    [ "$shape" = 60m ] && layers=$LAYERS_60M
    run "cola-$shape-tp$tp-btp_full-fwdcheck" "$tp" "cola-$shape" btp full "$layers" "$BATCH" "$SEQ" 1
    run "cola-$shape-tp$tp-vanilla_full-fwdcheck" "$tp" "cola-$shape" vanilla full "$layers" "$BATCH" "$SEQ" 1
    run "llama-$shape-tp$tp-megatron_full-fwdcheck" "$tp" "llama-$shape" megatron full "$layers" "$BATCH" "$SEQ" 1
  done
fi
if [ "$RC_STEPS" -gt 0 ]; then
  for rc_mode in none lowrank; do
    run "cola-60m-tp1-recompute_$rc_mode-init" 1 cola-60m none "$rc_mode" "" 4 256 1 "$RC_THREADS"
    run "cola-60m-tp1-recompute_$rc_mode-r1" 1 cola-60m none "$rc_mode" "" 4 256 "$RC_STEPS" "$RC_THREADS"
  done
fi
WALL=$(( $(date +%s) - T_START ))
echo "$WALL" > "$OUT/wall_s"
fi # REPORT_ONLY
WALL=$(cat "$OUT/wall_s" 2> /dev/null || echo "?")

# --- report --------------------------------------------------------------------
"$PY" - "$OUT" "$WALL" "$(getconf CLK_TCK)" "$(nproc)" "$SEQ" "$BATCH" "$STEPS" "$ROUNDS" <<'EOF'
import json, os, re, statistics, sys

out, wall, clk_tck, ncpu, SEQ, BATCH, STEPS, ROUNDS = sys.argv[1:9]
clk_tck, ncpu = float(clk_tck), int(ncpu)

def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""

def dims(log):
    m = re.search(r"model (\S+): ([0-9.]+\w?) parameters, d=(\d+) layers=(\d+) heads=(\d+) ffn=(\d+) "
                  r"ranks attn/mlp=(\d+)/(\d+) lowrank=(\S+)", log)
    if not m:
        return None
    return {"params": m.group(2), "d": int(m.group(3)), "layers": int(m.group(4)), "ffn": int(m.group(6)),
            "r_attn": int(m.group(7)), "r_mlp": int(m.group(8)), "lowrank": m.group(9)}

def expected_elems(mode, rc, dm, N):
    """tp all-reduce elements of one training step (forward + backward) per the
    formulas, and per layer. Per layer, forward: btp 7·N·r + 2·N norm scalars
    (one per norm: q/k/v's and gate/up's A all-reduce carry Σx²), vanilla
    N·(5d + 2·ffn), megatron 2·N·d. Backward (trainer/model/model.c): btp all-reduces
    each group's r-dim input gradient, 7·N·r; vanilla one input gradient per
    group (q/k/v and gate/up are summed locally first), N·(3d + ffn); megatron
    one per column-parallel group, 2·N·d. Head (every mode, tp > 1): parallel
    cross-entropy 3·N (max, sum, target logit) and the LM head's input
    gradient N·d. See docs/PARALLELISM.md "What is communicated"."""
    d, F, ra, rm = dm["d"], dm["ffn"], dm["r_attn"], dm["r_mlp"]
    r7 = 4 * ra + 3 * rm  # q,k,v,o + gate,up,down
    if mode == "btp":
        fwd, bwd = N * r7 + 2 * N, N * r7
    elif mode == "vanilla":
        fwd, bwd = N * (5 * d + 2 * F), N * (3 * d + F)
    else:
        fwd, bwd = 2 * N * d, 2 * N * d
    # recompute replays the forward's all-reduces, except lowrank under btp
    # (the rebuild starts after the A GEMM: no collective)
    layer = fwd + bwd + (fwd if rc == "full" or (rc == "lowrank" and mode != "btp") else 0)
    head = 3 * N + N * d
    return dm["layers"] * layer + head, layer, fwd, head

runs = []
for line in read(os.path.join(out, "runs.txt")).splitlines():
    tag, rc, preset, mode, rcm, tp, layers, batch, seq, busy, j0, j1, load = line.split()
    r = {"tag": tag, "rc": int(rc), "preset": preset, "mode": mode if mode != "none" else "single", "recompute": rcm,
         "tp": int(tp), "batch": int(batch), "seq": int(seq), "busy_before_pct": int(busy), "loadavg_after": float(load)}
    t = read(os.path.join(out, tag + ".time")).split()
    try:
        elapsed, cpu = float(t[-3]), float(t[-2]) + float(t[-1])
        r["elapsed_s"], r["cpu_s"] = elapsed, cpu
        # other processes' load during the run, in cores (our CPU time counted via mpirun's children)
        r["other_load_cores"] = max(0.0, ((int(j1) - int(j0)) / clk_tck - cpu) / elapsed)
    except (IndexError, ValueError):
        pass
    log = read(os.path.join(out, tag + ".log"))
    dm = dims(log)
    ma = re.search(r"memory acts\s+([0-9.]+) MiB .*?; ([0-9.]+) MiB per layer kept with recompute=(\w+)", log)
    if ma:
        r["acts_mib"], r["acts_mib_per_layer"] = float(ma.group(1)), float(ma.group(2))
    mp = re.search(r"memory params\s+([0-9.]+) MiB", log)
    if mp:
        r["params_mib_per_rank"] = float(mp.group(1))
    mt = re.search(r"\| (\d+) threads/rank", log)
    r["threads_per_rank"] = int(mt.group(1)) if mt else None
    steps = []
    for l in read(os.path.join(out, tag + ".jsonl")).splitlines():
        try:
            steps.append(json.loads(l))
        except ValueError:
            pass
    r["dims"] = dm
    r["nsteps"] = len(steps)
    r["init_only"] = tag.endswith("-init")
    if r["rc"] == 0 and steps and dm:
        timed = [s for s in steps if s["step"] >= 2] or steps
        r["step_ms"] = [s["step_ms"] for s in timed]
        ar = [s.get("comm", {}).get("tp_allreduce", {}) for s in steps]
        ag = [s.get("comm", {}).get("tp_allgather", {}) for s in steps]
        r["ar_bytes"] = ar[-1].get("bytes", 0)
        r["ar_calls"] = ar[-1].get("calls", 0)
        r["ar_constant"] = all(a.get("bytes", 0) == r["ar_bytes"] for a in ar)
        r["ar_seconds"] = [a.get("seconds", 0.0) for a, s in zip(ar, steps) if s in timed]
        r["ag_bytes"] = ag[-1].get("bytes", 0)
        N = r["batch"] * r["seq"]
        if r["tp"] > 1:
            tot, layer, fwd, head = expected_elems(r["mode"], r["recompute"], dm, N)
            r["expected_bytes"], r["expected_layer_bytes"], r["expected_layer_fwd_bytes"] = 4 * tot, 4 * layer, 4 * fwd
            r["measured_layer_bytes"] = (r["ar_bytes"] / 4 - head) / dm["layers"] * 4
    runs.append(r)

with open(os.path.join(out, "results.jsonl"), "w") as f:
    for r in runs:
        f.write(json.dumps(r) + "\n")

def med(v):
    return statistics.median(v) if v else None

MiB = 1 << 20
# pool rounds
groups = {}
for r in runs:
    if r["init_only"]:
        continue
    key = (r["preset"], r["tp"], r["mode"], r["recompute"], r["batch"], r["seq"])
    groups.setdefault(key, []).append(r)
pooled = {}
for key, rs in groups.items():
    ok = [r for r in rs if r["rc"] == 0 and "step_ms" in r]
    p = {"key": key, "runs": rs, "ok": bool(ok) and len(ok) == len(rs)}
    if ok:
        p["step_ms"] = med([x for r in ok for x in r["step_ms"]])
        p["min_ms"] = min(x for r in ok for x in r["step_ms"])
        p["ar_s"] = med([x for r in ok for x in r["ar_seconds"]])
        p["other"] = med([r["other_load_cores"] for r in ok if "other_load_cores" in r])
        p["r0"] = ok[0]
    pooled[key] = p

lines = []
P = lines.append
shape_note = {}
P(f"tp runs: batch {BATCH} x seq {SEQ}, {STEPS} steps per run (steps 2..{STEPS} timed), {ROUNDS} round(s) pooled; "
  f"{ncpu} cores; total wall {wall} s")
P("")
P("| model | layers | r | tp | mode | recompute | tp all-reduce MiB/step | calls | formula MiB | per layer KiB (fwd+bwd) | "
  "tp all-gather KiB | median step ms | min ms | all-reduce s/step | acts MiB/layer | params MiB/rank | other load (cores) |")
P("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
verdicts = []
for key, p in pooled.items():
    preset, tp, mode, rcm, b, s = key
    if tp == 1 or rcm == "full":
        continue
    if not p.get("r0"):
        P(f"| {preset} | | | {tp} | {mode} | {rcm} | FAILED | | | | | | | | | | |")
        continue
    r = p["r0"]
    dm = r["dims"]
    rr = f"{dm['r_attn']}" if dm["lowrank"] != "none" else "—"
    match = "=" if r["ar_bytes"] == r["expected_bytes"] else "≠ " + f"{r['expected_bytes'] / MiB:.3f}"
    if not r["ar_constant"]:
        match += " (varies by step)"
    P(f"| {preset} | {dm['layers']} | {rr} | {tp} | {mode} | {rcm} | {r['ar_bytes'] / MiB:.3f} | {r['ar_calls']} | "
      f"{match} | {r['measured_layer_bytes'] / 1024:.1f} | {r['ag_bytes'] / 1024:.1f} | {p['step_ms']:.0f} | {p['min_ms']:.0f} | "
      f"{p['ar_s']:.3f} | {r.get('acts_mib_per_layer', float('nan')):.2f} | {r.get('params_mib_per_rank', float('nan')):.1f} | "
      f"{'—' if p['other'] is None else format(p['other'], '.1f')} |")

P("")
P("Ratios within this run (bytes: tp all-reduce per step; time: median step time of all rounds pooled, "
  "(in brackets) the ratio of the fastest steps, [in square brackets] round by round, the modes of a round "
  "having run back to back):")
P("")
P("| shape | r/d | tp | btp/vanilla bytes | per layer | forward per layer | btp/vanilla time | btp/megatron bytes | "
  "btp/megatron time | lowrank recompute: bytes, time vs btp |")
P("|---|---|---|---|---|---|---|---|---|---|")
shapes = sorted({k[0].split("-", 1)[1] for k in pooled if k[1] > 1}, key=lambda x: int(x[:-1]))
tps = sorted({k[1] for k in pooled if k[1] > 1})
for sh in shapes:
    for tp in tps:
        def get(preset, mode, rcm="none"):
            p = pooled.get((preset, tp, mode, rcm, int(BATCH), int(SEQ)))
            return p if p and p.get("r0") else None
        bt, va, me = get(f"cola-{sh}", "btp"), get(f"cola-{sh}", "vanilla"), get(f"llama-{sh}", "megatron")
        lr = get(f"cola-{sh}", "btp", "lowrank")
        def rounds(x, y):
            """Per-round ratio of median step times: runs of one round ran back to back."""
            def by_round(p):
                return {r["tag"].rsplit("-r", 1)[1]: med(r["step_ms"]) for r in p["runs"] if r.get("step_ms")}
            bx, by = by_round(x), by_round(y)
            return "[" + ", ".join(f"{bx[k] / by[k]:.2f}" for k in sorted(bx, key=int) if k in by) + "]"
        if not bt:
            continue
        dm = bt["r0"]["dims"]
        cells = [f"{sh}", f"{dm['r_attn']}/{dm['d']} = 1/{dm['d'] / dm['r_attn']:.3g}", f"{tp}"]
        if va:
            rb = bt["r0"]["ar_bytes"] / va["r0"]["ar_bytes"]
            rl = bt["r0"]["measured_layer_bytes"] / va["r0"]["measured_layer_bytes"]
            rf = bt["r0"]["expected_layer_fwd_bytes"] / va["r0"]["expected_layer_fwd_bytes"]
            rt = bt["step_ms"] / va["step_ms"]
            cells += [f"{rb:.3f}", f"{rl:.3f}", f"{rf:.3f}", f"{rt:.2f} ({bt['min_ms'] / va['min_ms']:.2f}) {rounds(bt, va)}"]
            if dm["r_attn"] * 4 == dm["d"] and dm["r_mlp"] * 4 == dm["d"]:
                verdicts.append(f"{sh} tp={tp}: btp bytes {rb:.3f}x vanilla (target <= 0.27): {'PASS' if rb <= 0.27 else 'FAIL'}")
            verdicts.append(f"{sh} tp={tp}: btp step time {rt:.2f}x vanilla (target < 1): {'PASS' if rt < 1 else 'FAIL'}")
        else:
            cells += ["—"] * 4
        if me:
            cells += [f"{bt['r0']['ar_bytes'] / me['r0']['ar_bytes']:.3f}",
                      f"{bt['step_ms'] / me['step_ms']:.2f} ({bt['min_ms'] / me['min_ms']:.2f}) {rounds(bt, me)}"]
        else:
            cells += ["—"] * 2
        if lr:
            cells += [f"{lr['r0']['ar_bytes'] / bt['r0']['ar_bytes']:.3f}, {lr['step_ms'] / bt['step_ms']:.2f} "
                      f"({lr['min_ms'] / bt['min_ms']:.2f}) {rounds(lr, bt)}"]
        else:
            cells += ["—"]
        P("| " + " | ".join(cells) + " |")

fc = [(k, p) for k, p in pooled.items() if k[3] == "full" and p.get("r0")]
if fc:
    P("")
    P("Per-layer all-reduce volume over tp, floats (N = b·s tokens). recompute=full replays the forward's "
      "all-reduces in the backward, so forward = (bytes(full) − bytes(none)) / 4 / layers; backward = the rest "
      "after the head's N·d + 3·N:")
    P("")
    P("| model | tp | mode | N | forward measured | forward formula | backward measured | backward formula | match |")
    P("|---|---|---|---|---|---|---|---|---|")
    for k, p in fc:
        preset, tp, mode, _, b, sq = k
        base = pooled.get((preset, tp, mode, "none", b, sq))
        if not base or not base.get("r0"):
            continue
        rf, rn = p["r0"], base["r0"]
        dm, N = rn["dims"], b * sq
        L, d, F, ra, rm = dm["layers"], dm["d"], dm["ffn"], dm["r_attn"], dm["r_mlp"]
        fwd_m = (rf["ar_bytes"] - rn["ar_bytes"]) / 4 / L
        bwd_m = (rn["ar_bytes"] / 4 - N * d - 3 * N) / L - fwd_m
        if mode == "btp":
            rtxt = f"{ra}" if ra == rm else f"(4·{ra}+3·{rm})/7"
            ff, ftxt = N * (4 * ra + 3 * rm) + 2 * N, f"7·N·r + 2·N = 7·{N}·{rtxt} + 2·{N} = {N * (4 * ra + 3 * rm) + 2 * N}"
            bf, btxt = N * (4 * ra + 3 * rm), f"7·N·r = {N * (4 * ra + 3 * rm)}"
        elif mode == "vanilla":
            ff, ftxt = N * (5 * d + 2 * F), f"N·(5d + 2·ffn) = {N}·(5·{d} + 2·{F}) = {N * (5 * d + 2 * F)}"
            bf, btxt = N * (3 * d + F), f"N·(3d + ffn) = {N * (3 * d + F)}"
        else:
            ff, ftxt = 2 * N * d, f"2·N·d = 2·{N}·{d} = {2 * N * d}"
            bf, btxt = 2 * N * d, f"2·N·d = {2 * N * d}"
        ok = fwd_m == ff and bwd_m == bf
        P(f"| {preset} | {tp} | {mode} | {N} | {fwd_m:.0f} | {ftxt} | {bwd_m:.0f} | {btxt} | {'exact' if ok else 'MISMATCH'} |")
        verdicts.append(f"{preset} {mode}: per-layer forward/backward all-reduce volume "
                        f"{'equals' if ok else 'DIFFERS FROM'} the formula")

rc = {k[3]: p for k, p in pooled.items() if k[1] == 1 and p.get("r0")}
init = {r["recompute"]: r for r in runs if r["init_only"] and r["rc"] == 0 and "cpu_s" in r}
def cpu_per_step(m):
    """CPU seconds per training step: (CPU of the run - CPU of the 1-step run) / (steps - 1)."""
    rs = [r for r in rc[m]["runs"] if r["rc"] == 0 and "cpu_s" in r and r["nsteps"] > init[m]["nsteps"]] if m in init else []
    if not rs:
        return None
    return med([(r["cpu_s"] - init[m]["cpu_s"]) / (r["nsteps"] - init[m]["nsteps"]) for r in rs])
if rc:
    th = next(iter(rc.values()))["r0"].get("threads_per_rank")
    P("")
    P(f"Activation memory and recompute cost, cola-60m, batch 4 x seq 256, one process, {th} thread(s) "
      "(memory from the start-up line; CPU s/step = (CPU of the run − CPU of a 1-step run) / (steps − 1), "
      "which other load on the machine hardly inflates):")
    P("")
    P("| recompute | acts MiB/layer | acts MiB total | median step ms | min ms | CPU s/step |")
    P("|---|---|---|---|---|---|")
    for m in ("none", "lowrank"):
        if m in rc:
            p = rc[m]
            c = cpu_per_step(m)
            P(f"| {m} | {p['r0'].get('acts_mib_per_layer', float('nan')):.2f} | {p['r0'].get('acts_mib', float('nan')):.2f} | "
              f"{p['step_ms']:.0f} | {p['min_ms']:.0f} | {'—' if c is None else format(c, '.2f')} |")
    if "none" in rc and "lowrank" in rc:
        a, b = rc["none"]["r0"], rc["lowrank"]["r0"]
        ca, cb = cpu_per_step("none"), cpu_per_step("lowrank")
        P("")
        P(f"lowrank keeps {b['acts_mib_per_layer'] / a['acts_mib_per_layer']:.3f}x the activation memory per layer of none "
          f"({a['acts_mib_per_layer'] / b['acts_mib_per_layer']:.1f}x less); step time {rc['lowrank']['step_ms'] / rc['none']['step_ms']:.2f}x "
          f"(fastest steps {rc['lowrank']['min_ms'] / rc['none']['min_ms']:.2f}x"
          + (f", CPU per step {cb / ca:.2f}x" if ca and cb else "") + ").")
        verdicts.append(f"lowrank recompute per-layer activations {b['acts_mib_per_layer'] / a['acts_mib_per_layer']:.3f}x none "
                        f"(target <= ~0.5): {'PASS' if b['acts_mib_per_layer'] <= 0.55 * a['acts_mib_per_layer'] else 'FAIL'}")
bad = [r["tag"] for r in runs if r["rc"] != 0 or ("step_ms" not in r and not r["init_only"])]
if verdicts:
    P("")
    for v in verdicts:
        P("- " + v)
if bad:
    P("")
    P("FAILED runs: " + ", ".join(bad))
text = "\n".join(lines) + "\n"
with open(os.path.join(out, "results.md"), "w") as f:
    f.write(text)
print(text, end="")
EOF
log "results in $OUT (results.md, results.jsonl, per-run logs)"
exit $FAILED
