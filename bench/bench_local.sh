#!/usr/bin/env bash
# The local level against the checkpoint file (issue 35): what a save of
# each level costs, how fast a restart comes back from local memory, from a
# partner's copy and from the file, the memory the local level holds, and
# from those figures the expected time lost per failure (Young/Daly) at an
# MTBF of 1.8 h and 7.9 h with and without the local level.
#
#   bash bench/bench_local.sh [BUILD_DIR]        (PRESETS="cola-350m", STEPS=4)
#
# Per preset, 2 ranks with tp=2 on two simulated nodes of one rank
# (BOOST_RANKS_PER_NODE=1: partner copies on), seq 64, batch 1:
# 1. a run without checkpoints: the step time;
# 2. the same run with the local level alone (ckpt.local_every=1), and one
#    with the file alone (ckpt.every=2), each killed (kill -9, every rank)
#    after step STEPS: each level's save on its own -- the local save's time
#    on its thread, the file's write time (checkpoints.jsonl), and the
#    step's stall against run 1;
# 3. relaunches of run 2's local-level run, each killed after its first
#    step: from the local level; from the partner copies (node 1's
#    directories removed); and of the file run: from the file. Each reports
#    the load as the log says it and the time from the relaunch to its
#    first step (a start from the local level then writes the file of its
#    step in the background: the first step shares the cores with it).
# Prints one table per preset and the Young/Daly estimates; the figures and
# the machine are in docs/PERFORMANCE.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$root/build}
PRESETS=${PRESETS:-cola-350m}
STEPS=${STEPS:-4}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
PY=/usr/bin/python3
export OMP_NUM_THREADS=1 HDF5_PLUGIN_PATH=$B/hdf5-plugins BOOST_RANKS_PER_NODE=1
tmp=$(mktemp -d "${BENCH_TMP:-/tmp}/boost_bench_local.XXXXXX")
shm=$(mktemp -d /dev/shm/boost_bench_local.XXXXXX)
mp=""
trap '[ -n "$mp" ] && kill -9 $mp 2>/dev/null; rm -rf "$tmp" "$shm"' EXIT
"$B/tools/boost-data" -q -o "$tmp/f.tok" /usr/share/games/fortunes >/dev/null
echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) | $(getconf _NPROCESSORS_ONLN) cores | load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "disk (ckpt.dir): $(df -h "$tmp" | awk 'NR==2{print $1, $2}') | /dev/shm: $(df -h /dev/shm | awk 'NR==2{print $2}')"

lines() { [ -f "$1" ] && wc -l <"$1" || echo 0; }

# launch LOG METRICS N ARGS...: boost-train on 2 ranks in the background,
# every rank killed once it logged N steps; prints the seconds from the
# launch to the first step it logged.
launch() {
  local log=$1 metrics=$2 n=$3 before until t0 first=""
  shift 3
  before=$(lines "$metrics")
  t0=$(date +%s.%N)
  until=-1
  $MPIRUN -n 2 "$B/trainer/boost-train" "${common[@]}" "$@" --set train.metrics="$metrics" >"$log" 2>&1 &
  mp=$!
  while kill -0 "$mp" 2>/dev/null; do
    local now
    now=$(lines "$metrics")
    if [ -z "$first" ] && [ "$now" -gt "$before" ]; then # a line appended: this launch's first step
      first=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')
      until=$((before + n))
    fi
    [ "$until" -ge 0 ] && [ "$now" -ge "$until" ] && break
    sleep 0.05
  done
  local ranks
  ranks=$(pgrep -P "$mp" || true)
  kill -9 $ranks "$mp" 2>/dev/null || true
  wait "$mp" 2>/dev/null || true
  for p in $ranks; do while kill -0 "$p" 2>/dev/null; do sleep 0.05; done; done
  mp=""
  [ -n "$first" ] || { echo "no step logged: $(tail -3 "$log")" >&2; exit 1; }
  echo "$first"
}

for preset in $PRESETS; do
  common=(--set model.preset="$preset" --set data.train="$tmp/f.tok" --set model.seq_len=64 --set train.batch_size=1
    --set train.val_batches=0 --set train.threads=1 --set train.warmup_steps=0 --set parallel.tp=2
    --set train.steps=100 --set train.log_every=1)
  d=$tmp/$preset
  rm -rf "$d" "$shm"/*
  mkdir -p "$d"
  echo "== $preset (2 ranks, tp=2, two nodes of one rank)"
  launch "$d/plain.log" "$d/plain.jsonl" "$STEPS" >/dev/null
  launch "$d/save.log" "$d/save.jsonl" "$STEPS" --set ckpt.dir="$d/ck" --set ckpt.every=0 --set ckpt.local_every=1 \
    --set ckpt.local_dir="$shm/l" >/dev/null
  grep -o "checkpoint: local level.*" "$d/save.log" | head -1
  held=$(du -sb "$shm/l" | cut -f1)
  launch "$d/file.log" "$d/file.jsonl" "$STEPS" --set ckpt.dir="$d/fk" --set ckpt.every=2 >/dev/null
  t_local=$(launch "$d/r_local.log" "$d/save.jsonl" 1 --set ckpt.dir="$d/ck" --set ckpt.every=0 \
    --set ckpt.local_every=1 --set ckpt.local_dir="$shm/l")
  rm -rf "$shm/l/rank_00001" "$shm/l/partner_00000" # node 1 lost: its own copy and the one it kept for node 0
  t_partner=$(launch "$d/r_partner.log" "$d/save.jsonl" 1 --set ckpt.dir="$d/ck" --set ckpt.every=0 \
    --set ckpt.local_every=1 --set ckpt.local_dir="$shm/l")
  t_file=$(launch "$d/r_file.log" "$d/file.jsonl" 1 --set ckpt.dir="$d/fk" --set ckpt.every=2)
  "$PY" - "$d" "$held" "$t_local" "$t_partner" "$t_file" <<'PYEOF'
import json, math, re, sys
d, held, t_local, t_partner, t_file = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
def steps(path):
    return [json.loads(l) for l in open(path)]
plain = [r["time"] for r in steps(d + "/plain.jsonl")]
saved = steps(d + "/save.jsonl")
def step_s(times):  # per-step wall time, the first step (start-up) left out
    dt = [b - a for a, b in zip(times, times[1:])]
    return sorted(dt)[len(dt) // 2] if dt else float("nan")
base = step_s(plain)
with_local = step_s([r["time"] for r in saved[:len(plain)]])  # the first launch's steps
with_file = step_s([r["time"] for r in steps(d + "/file.jsonl")[:len(plain)]])
log = open(d + "/save.log").read()
local_ms = [float(x) for x in re.findall(r"local step \d+ ([0-9.]+) ms", log)]
jl = [json.loads(l) for l in open(d + "/fk/checkpoints.jsonl")]
files = [j for j in jl if j.get("committed") and j.get("step", 0) <= len(plain)]
fw = [j["write_s"] for j in files]
fstall = [j["stall_s"] + j["wait_prev_s"] for j in files]
def load(name, pat):
    m = re.search(pat, open(d + "/" + name).read())
    return float(m.group(1)) if m else float("nan")
l_local = load("r_local.log", r"resumed from the local level: step \d+ .*?, ([0-9.]+) s")
l_partner = load("r_partner.log", r"resumed from the local level: step \d+ .*partner copies.*?, ([0-9.]+) s")
l_file = load("r_file.log", r"verified and loaded in ([0-9.]+) s")
med = lambda v: sorted(v)[len(v) // 2] if v else float("nan")
print("step time (median): %.2f s without checkpoints, %.2f s with the local level every step, %.2f s with a file "
      "every 2 steps" % (base, with_local, with_file))
print("save, local level: %.3f s on its thread (median of %d), %.3f s a step more than without" %
      (med(local_ms) / 1e3, len(local_ms), with_local - base))
print("save, file: %.2f s written (median of %d), stall %.3f s, %.3f s a step more than without" %
      (med(fw), len(fw), med(fstall), with_file - base))
print("memory: %.1f MiB held in the local directory after the run (own + partner copies of both ranks)" % (held / 2**20))
print("restart      load      relaunch to first step")
print("local       %6.2f s   %6.2f s" % (l_local, t_local))
print("partner     %6.2f s   %6.2f s" % (l_partner, t_partner))
print("file        %6.2f s   %6.2f s" % (l_file, t_file))
def daly(delta, M):
    if delta >= 2 * M: return M
    x = delta / (2 * M)
    return math.sqrt(2 * delta * M) * (1 + math.sqrt(x) / 3 + x / 9) - delta
# Expected time lost per failure: half an interval of work plus the restart.
# Each level's cost delta is its save time as if it blocked training (the
# file's write, the local save's time on its thread): both run beside
# training, but on a node whose cores all train that is what they take from
# it; an interval is at least one step.
d_file = max(med(fw), 1e-3)
d_loc = max(med(local_ms) / 1e3, 1e-3)
for name, M in (("1.8 h", 1.8 * 3600), ("7.9 h", 7.9 * 3600)):
    tf = max(daly(d_file, M), base)
    tl = max(daly(d_loc, M), base)
    only_file = tf / 2 + t_file
    two = tl / 2 + t_local
    print("MTBF %s: file only: interval %.0f s, %.1f s lost per failure; with the local level: interval %.1f s "
          "(%.0f steps), %.1f s lost per failure (%.1fx less)" % (name, tf, only_file, tl, max(1, tl / base), two,
                                                              only_file / two))
PYEOF
done
