#!/usr/bin/env bash
# The time training stalls for the remote level's uploads (issue 42): the
# same job with the file level only (A) and with the file level + the remote
# level (B), SeaweedFS on 127.0.0.1 running in both arms, interleaved rounds
# (A B A B ...), the step times of the steps an upload was in flight in B
# against the same steps of A.
#
#   bash bench/bench_remote_stall.sh [BUILD] [--preset P] [--precision bf16|fp32]
#        [--rounds R] [--steps N] [--every K] [--batch B] [--seq T]
#        [--threads N] [--ranks N] [--pin]
#
# Defaults: build/, cola-60m, bf16, 3 rounds, 48 steps, ckpt.every=16
# (keep_last=2), B=2, T=64, train.threads=1, 1 rank. --ranks 2: dp=2 under
# mpirun (each rank sends its share of the parts). --pin: the server on
# core 0 (taskset, every thread), the training process (its upload threads
# included) on core 1, in both arms; without it everything shares the cores.
#
# Which steps had an upload in flight comes from the step log's order: the
# hand-over happens in the submit of the step whose ckpt column says
# "step N committed"; the upload ends at "checkpoint: remote step N uploaded
# ... in T s"; that step, the ones after it and the one whose line follows
# the "uploaded" line are in flight. Per step, from train.metrics:
#   wall   the time between two steps' metrics lines (the training thread's
#          whole iteration: the step, the checkpoint submit, the logging)
#   step   step_ms (forward, backward, the optimizer step and its fence
#          wait for the staging; no checkpoint call)
#   calls  wall - step: time of the training thread outside the step (the
#          checkpoint submit and hand-over, the logging)
#   lost   (sum of B's in-flight walls - A's) / the uploads handed over
#          during the steps: training time lost per upload
# Reported per round: sum over the in-flight steps of B / the same steps of
# A (wall, step), and the same ratio over the other steps (the control: the
# noise of the machine, and any cost of the remote level while idle); the
# mean calls time per in-flight step in each arm; the end of the run (the
# last checkpoint's upload awaited at exit, ckpt.remote_grace); the CPU
# seconds of the training process (/usr/bin/time) and of the server
# (/proc/PID/stat) in each arm: their difference per upload is what an
# upload costs the client and the server, whatever the machine's load; with
# 1 rank, the training thread's /proc schedstat sampled at 20 Hz splits the
# in-flight steps' extra time into more time on a CPU (slower execution),
# time runnable but waiting for a CPU (contention) and time asleep (waiting
# on a lock, a file, the upload: a real stall). Then the
# median and range over the rounds, the in-flight ratio over the other
# steps' ratio (the run's load cancelled), the uploads' MiB and seconds, the load.
# KEEP=1 keeps the runs' logs and metrics (the folder is named at the end).
# Exit 0, 1 when a run failed, 2 on bad arguments.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build preset=cola-60m precision=bf16 rounds=3 steps=48 every=16 batch=2 seq=64 threads=1 ranks=1 pin=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
  -h | --help) usage; exit 0 ;;
  --preset) preset=$2; shift ;;
  --precision) precision=$2; shift ;;
  --rounds) rounds=$2; shift ;;
  --steps) steps=$2; shift ;;
  --every) every=$2; shift ;;
  --batch) batch=$2; shift ;;
  --seq) seq=$2; shift ;;
  --threads) threads=$2; shift ;;
  --ranks) ranks=$2; shift ;;
  --pin) pin=1 ;;
  -*) echo "bench_remote_stall: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  *) build=$(cd "$1" && pwd) ;;
  esac
  shift
done
for v in "$rounds" "$steps" "$every" "$batch" "$seq" "$threads" "$ranks"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bench_remote_stall: '$v' is not a positive number" >&2; exit 2; }
done
[ "$every" -lt "$steps" ] || { echo "bench_remote_stall: --every must be below --steps (uploads during training)" >&2; exit 2; }
[ "$pin" = 0 ] || [ "$ranks" = 1 ] || { echo "bench_remote_stall: --pin is for 1 rank (2 cores: server + training)" >&2; exit 2; }
TRAIN=$build/trainer/boost-train
[ -x "$TRAIN" ] || { echo "bench_remote_stall: $TRAIN not built (bash scripts/build.sh)" >&2; exit 2; }
export BOOST_BINARY_DIR=$build BOOST_SOURCE_DIR=$root
export HDF5_PLUGIN_PATH=$build/hdf5-plugins OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=passive
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
work=$(mktemp -d /tmp/bench_remote_stall.XXXXXX)
cleanup() { if [ "${KEEP:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi; }
source "$root/tests/mpi/remote_common.bash" # starts nothing yet; its EXIT trap stops the server and calls cleanup
"$build/tools/boost-data" -q -o "$work/f.tok" /usr/share/games/fortunes >/dev/null
start_server
rc s3://stall/run mkbucket >/dev/null
train_pin=()
if [ "$pin" = 1 ]; then
  taskset -a -p -c 0 "$WEED_PID" >/dev/null
  train_pin=(taskset -c 1)
fi
launch=("${train_pin[@]}")
[ "$ranks" = 1 ] || read -r -a launch <<<"$MPIRUN -n $ranks"
common=(--set model.preset="$preset" --set train.precision="$precision" --set model.seq_len="$seq"
  --set train.batch_size="$batch" --set train.threads="$threads" --set train.steps="$steps" --set train.warmup_steps=0
  --set train.val_batches=0 --set data.train="$work/f.tok" --set ckpt.every="$every" --set ckpt.keep_last=2
  --set parallel.dp="$ranks")
weed_cpu() { # the server's user + system CPU so far, in clock ticks (every thread of weed mini)
  awk '{print $14 + $15}' "/proc/$WEED_PID/stat"
}
# /proc/PID/task/PID/schedstat of the training thread (the main thread) at
# 20 Hz: time on a CPU and time runnable but waiting for one (run queue), ns.
sampler='
import sys, time
path = "/proc/%s/task/%s/schedstat" % (sys.argv[1], sys.argv[1])
with open(sys.argv[2], "w") as out:
    while True:
        try:
            v = open(path).read().split()
        except OSError:
            break
        out.write("%.3f %s %s\n" % (time.time(), v[0], v[1]))
        time.sleep(0.05)
'
run_arm() { # ARM ROUND: one run; its log, metrics and whole wall time in $work
  local arm=$1 r=$2 extra=() t0 t1
  [ "$arm" = A ] || extra=(--set "ckpt.remote=s3://stall/run$r" --set ckpt.remote_endpoint="$BOOST_S3_ENDPOINT")
  rm -rf "$work/ck"
  local s0 s1
  s0=$(weed_cpu)
  t0=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$work/$arm$r.cpu" "${launch[@]}" "$TRAIN" "${common[@]}" --set ckpt.dir="$work/ck" \
    --set train.metrics="$work/$arm$r.jsonl" "${extra[@]}" >"$work/$arm$r.log" 2>&1 &
  local tp=$! p="" sp=""
  if [ "$ranks" = 1 ]; then # the training thread's scheduler statistics, sampled (taskset execs boost-train)
    for _ in $(seq 1 100); do p=$(pgrep -P "$tp" || true); [ -n "$p" ] && break; sleep 0.05; done
    [ -z "$p" ] || { /usr/bin/python3 -c "$sampler" "$p" "$work/$arm$r.sched" & sp=$!; }
  fi
  wait "$tp" || { echo "bench_remote_stall: run $arm$r failed: $(tail -3 "$work/$arm$r.log")" >&2; exit 1; }
  [ -z "$sp" ] || wait "$sp"
  t1=$(date +%s.%N)
  s1=$(weed_cpu)
  echo "$t0 $t1" >"$work/$arm$r.wall"
  echo "$s0 $s1" >"$work/$arm$r.weed"
}
for r in $(seq 1 "$rounds"); do
  run_arm A "$r"
  run_arm B "$r"
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "bench_remote_stall: $preset $precision B=$batch T=$seq, $steps steps, ckpt.every=$every, train.threads=$threads," \
  "$ranks rank(s), $([ "$pin" = 1 ] && echo "server on core 0, training on core 1" || echo "unpinned"); $rounds rounds A B interleaved"
echo "cpu: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load at the end $load"
/usr/bin/python3 - "$work" "$rounds" <<'PYEOF'
import json, re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
STEP = re.compile(r"^step\s+(\d+)/")
HAND = re.compile(r"step (\d+) committed")
UP = re.compile(r"checkpoint: remote step (\d+) uploaded .*, ([0-9.]+) MiB in ([0-9.]+) s")

def metrics(path):
    m = {o["step"]: o for o in map(json.loads, open(path))}
    wall = {s: (m[s]["time"] - m[s - 1]["time"]) * 1e3 for s in m if s - 1 in m}
    return wall, {s: m[s]["step_ms"] for s in m}, m

def inflight(path):
    steps, ups, up, tail, hands = set(), [], None, False, 0
    for line in open(path, errors="replace"):
        g = STEP.match(line)
        if g:
            s = int(g.group(1))
            if up is not None or tail:
                steps.add(s)
            tail = False
            h = HAND.search(line)
            if h:
                up = int(h.group(1))
                steps.add(s)
                hands += 1
            continue
        u = UP.search(line)
        if u:
            ups.append((float(u.group(2)), float(u.group(3))))
            up, tail = None, True
    return steps, ups, hands

COMMIT = re.compile(r"step (\d+) committed ([0-9.]+) s")
def commits(path): # the file level's commit times (hand-over to commit), seconds
    return [float(c.group(2)) for c in COMMIT.finditer(open(path, errors="replace").read())]

TICK = float(__import__("os").sysconf("SC_CLK_TCK"))
def cpu(arm, r): # the training process's CPU s (user + system), the server's CPU s during the run
    u, st = map(float, open("%s/%s%d.cpu" % (work, arm, r)).read().split()[-2:])
    a, b = map(float, open("%s/%s%d.weed" % (work, arm, r)).read().split())
    return u + st, (b - a) / TICK
import bisect, os
def sched(arm, r): # t -> (on-CPU s, run-queue s), interpolated; None without samples
    path = "%s/%s%d.sched" % (work, arm, r)
    if not os.path.exists(path):
        return None
    rows_ = [tuple(map(float, l.split())) for l in open(path) if len(l.split()) == 3]
    ts = [x[0] for x in rows_]
    def at(t):
        i = min(max(bisect.bisect_left(ts, t), 1), len(ts) - 1)
        a, b = rows_[i - 1], rows_[i]
        f = 0.0 if b[0] == a[0] else min(max((t - a[0]) / (b[0] - a[0]), 0.0), 1.0)
        return (a[1] + f * (b[1] - a[1])) / 1e9, (a[2] + f * (b[2] - a[2])) / 1e9
    return at if len(rows_) > 1 else None
def split(m, at, ss): # over the steps ss: on-CPU s, run-queue s, the rest (asleep: waits) s
    cpu = runq = wall = 0.0
    for s_ in ss:
        t0, t1 = m[s_ - 1]["time"], m[s_]["time"]
        c0, q0 = at(t0); c1, q1 = at(t1)
        cpu += c1 - c0; runq += q1 - q0; wall += t1 - t0
    return cpu, runq, wall - cpu - runq
rows, allups = [], []
for r in range(1, rounds + 1):
    wa, sa, ma = metrics("%s/A%d.jsonl" % (work, r))
    wb, sb, mb = metrics("%s/B%d.jsonl" % (work, r))
    fl, ups, hands = inflight("%s/B%d.log" % (work, r))
    allups += ups
    common = sorted(set(wa) & set(wb))
    inf = [s for s in common if s in fl]
    oth = [s for s in common if s not in fl]
    ratio = lambda d1, d2, ss: sum(d2[s] for s in ss) / sum(d1[s] for s in ss) if ss else float("nan")
    calls = lambda w, st, ss: statistics.mean(w[s] - st[s] for s in ss) if ss else float("nan")
    # the end: from the last step's metrics line to the process's exit (the final save, the upload awaited)
    enda = float(open("%s/A%d.wall" % (work, r)).read().split()[1]) - ma[max(ma)]["time"]
    endb = float(open("%s/B%d.wall" % (work, r)).read().split()[1]) - mb[max(mb)]["time"]
    rows.append(dict(r=r, n=len(inf), wall=ratio(wa, wb, inf), step=ratio(sa, sb, inf), ctl=ratio(wa, wb, oth),
                     ctls=ratio(sa, sb, oth), ca=calls(wa, sa, inf), cb=calls(wb, sb, inf),
                     msa=statistics.mean(wa[s] for s in inf) if inf else float("nan"),
                     msb=statistics.mean(wb[s] for s in inf) if inf else float("nan"),
                     enda=enda, endb=endb, nup=len(ups),
                     lost=(sum(wb[s] for s in inf) - sum(wa[s] for s in inf)) / 1e3 / max(1, hands),
                     fa=statistics.mean(commits("%s/A%d.log" % (work, r))),
                     fb=statistics.mean(commits("%s/B%d.log" % (work, r))),
                     sa=sched("A", r), sb=sched("B", r), ma=ma, mb=mb, inf=inf,
                     tca=cpu("A", r)[0], tcb=cpu("B", r)[0], sca=cpu("A", r)[1], scb=cpu("B", r)[1], nall=len(ups), hands=hands))
print()
print("| round | in-flight steps | wall ms/step A | B | wall B/A | step_ms B/A | other steps: wall B/A | step_ms B/A | calls ms/step A | B | lost per upload | file commit s A | B | end of run A | B | uploads | training CPU s A | B | server CPU s A | B |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for o in rows:
    print("| %(r)d | %(n)d | %(msa).0f | %(msb).0f | %(wall).3f | %(step).3f | %(ctl).3f | %(ctls).3f | %(ca).1f | %(cb).1f | %(lost).2f s | %(fa).2f | %(fb).2f | %(enda).1f s | %(endb).1f s | %(nup)d | %(tca).1f | %(tcb).1f | %(sca).1f | %(scb).1f |" % o)
def span(k):
    v = [o[k] for o in rows]
    return "%.3f (%.3f-%.3f)" % (statistics.median(v), min(v), max(v))
print()
print("median (range) over %d rounds: in-flight wall B/A %s, step_ms B/A %s; other steps wall B/A %s, step_ms B/A %s"
      % (len(rows), span("wall"), span("step"), span("ctl"), span("ctls")))
norm = [o["wall"] / o["ctl"] for o in rows]
print("in-flight wall B/A over the other steps' wall B/A (each round's load cancelled): median %.3f (%.3f-%.3f)"
      % (statistics.median(norm), min(norm), max(norm)))
print("calls (checkpoint submit + hand-over + logging) per in-flight step: A %.1f ms, B %.1f ms (means over rounds)"
      % (statistics.mean(o["ca"] for o in rows), statistics.mean(o["cb"] for o in rows)))
print("CPU per upload (all uploads of B, the final one included): the training process's own (its upload threads: read,"
      " XXH3, curl) %.2f s, the server's %.2f s (medians over rounds of (B - A) / uploads)"
      % (statistics.median((o["tcb"] - o["tca"]) / max(1, o["nall"]) for o in rows),
         statistics.median((o["scb"] - o["sca"]) / max(1, o["nall"]) for o in rows)))
if all(o["sa"] and o["sb"] for o in rows):
    per = []
    for o in rows:
        a = split(o["ma"], o["sa"], o["inf"]); b = split(o["mb"], o["sb"], o["inf"])
        per.append([(b[k] - a[k]) / max(1, o["hands"]) for k in range(3)])
    med = [statistics.median(x[k] for x in per) for k in range(3)]
    print("the in-flight steps' extra time per upload, B - A, from the training thread's schedstat (median over rounds;"
          " per round): on a CPU %+.2f s, runnable waiting for a CPU %+.2f s, asleep (waiting on something) %+.2f s; %s"
          % (med[0], med[1], med[2], " ".join("%+.2f/%+.2f/%+.2f" % tuple(x) for x in per)))
if allups:
    print("uploads during the runs (the final one included): %d, %.1f MiB each, %.2f s median (%.2f-%.2f)"
          % (len(allups), allups[0][0], statistics.median(u[1] for u in allups), min(u[1] for u in allups),
             max(u[1] for u in allups)))
PYEOF
