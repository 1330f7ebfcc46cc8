#!/usr/bin/env python3
"""The plan and the driver of tests/gpu/run_gpu_check.sh: which stages run,
in which order, under which time limit, and what the run's verdict is.

  gpu_plan.py table                            the stages: estimate, limit, what each checks
  gpu_plan.py plan [--budget S] STAGE...       the static plan: what fits S seconds if every
                                               stage takes its whole limit (exit 1 if a stage
                                               does not fit)
  gpu_plan.py run --self SCRIPT --out DIR [--logs DIR] [--budget S] [--no-device] STAGE...
                                               runs each stage (bash SCRIPT --_stage NAME) under
                                               its limit, its output in LOGS/NAME.log; writes the
                                               report to DIR: summary.txt, summary.json (every
                                               stage and every figure) and, with --logs,
                                               logs.tar.xz (the logs and small work files)

Stages run in priority order. A stage starts only if its whole limit fits in
what is left of the budget (default 540 s, BOOST_GPU_BUDGET_S): it is killed
at its limit (SIGTERM 3 s before, then SIGKILL), so a run never outlasts its
budget, and a stage that does not fit is reported not-run, never passed.
Stage status, from the stage's exit: 0 passed; 4 slow (every result right,
a speed bar not met: the figures are shown); 77 skipped (what the stage
needs is missing here: a tool, a peer's result, or its own time); any other
exit failed (a wrong result, a crash, or killed at its limit -- except the
stages whose time-out means "not judged", sanitize and bench: not-run);
not-run (does not fit what is left of the budget); no-device (no GPU: after
the probe fails, or with --no-device).

Run exit: 0 every stage passed; 1 a stage failed (a correctness failure,
whatever else happened); 77 no GPU (every stage that could run without one
passed); 3 none failed but some were not run or skipped (the check is
incomplete); 4 every stage ran and was right, but a speed bar was not met;
2 usage. The report is rewritten after every stage, so a run cut short
still leaves what it found.

BOOST_GPU_PLAN_SIM=FILE (ctest gpu_plan) replaces running by a virtual
clock: FILE is JSON, {"STAGE": {"seconds": S, "exit": C, "cmd": [...]}}; a
stage takes S seconds (default: its estimate; over its limit: killed at the
limit) and exits C (default 0), or runs cmd for its output and exit."""
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time

# name, estimate (s), limit (s), needs a GPU, what it checks. Estimates are
# for one H200 machine (16 cores) running nothing else. The build: nvcc for
# sm_90 alone takes 29 s of CPU for the 9 .cu files (embedding.cu, CUB's
# sort, 9.8 s; attention.cu 6.4 s; measured on a Xeon), compiled in
# parallel with about 130 C files (boost-generate and boost-eval included),
# after the carry's unpacking (about 100 MiB) and CMake's configure (CUDA,
# MPI, HDF5 found), then smoke runs: about 60 s. The training stages run
# the tiny preset (a second or two a run, most of it start-up; 2-rank runs
# pay mpirun's start); decode trains one 20-step tiny checkpoint on the CPU,
# then generates and evaluates it on both devices (about 8 runs of a second
# or two). The correctness stages come first; then stall (whose save also
# proves the asynchronous copy) and bench (speed alone: torch.compile of
# cola-1b, 30-60 s, and boost's initialisation of 1.1 B parameters). A limit
# is its estimate with 30-80% headroom (bench: 20%; a bench cut short is
# not judged, never failed); the limits add to 535 s of the 540 s budget
# (RESERVE: the report and the stages' launches).
STAGES = [
    ("env", 3, 10, False, "the machine: GPU, driver, toolkit, glibc, Python, PyTorch"),
    ("build", 60, 115, False, "unpack the carry, configure (CUDA and NCCL: both required), build, CPU smoke runs "
     "(one process, mpirun -n 2)"),
    ("probe", 3, 10, False, "boost-gpu-check --probe: is a GPU usable (no: the rest is no-device)"),
    ("check", 30, 42, True, "boost-gpu-check: every seam entry against the CPU backend, f32 and bf16; GEMM bench lines"),
    ("train", 20, 35, True, "tiny, 50 steps: cuda f32 vs cpu, cuda twice, cuda bf16 vs cpu: losses and grad norms"),
    ("ckpt", 18, 30, True, "save on cuda -> resume on cpu and the reverse; boost-inspect verify"),
    ("decode", 10, 20, True, "boost-generate (KV cache, prefill; and without the cache) and boost-eval on cuda vs "
     "the cpu, one checkpoint: tokens and loss"),
    ("multi", 35, 48, True, "2 ranks sharing the GPU, MPI communication: tp=2 btp, pp=2, dp=2 + ZeRO-1 vs the CPU"),
    ("nccl", 8, 15, True, "one rank, every size-1 group through NCCL: losses and grad norms vs the CPU"),
    ("sanitize", 25, 40, True, "compute-sanitizer memcheck and racecheck over boost-gpu-check --small"),
    ("stall", 35, 50, True, "cola-350m: async checkpoint stall <= 1% of a synchronous save (a speed bar)"),
    ("bench", 100, 120, True, "cola-1b bf16 beside PyTorch (compiled): tokens/s ratio >= 1.3, MFU >= 40% (speed bars)"),
]
# a stage killed at its limit was not judged (not-run), rather than wrong
TIMEOUT_NOT_RUN = {"sanitize", "bench"}
BUDGET = 540
RESERVE = 5  # the summary, the launch of each stage
TERM_BEFORE = 3  # SIGTERM this long before the limit, SIGKILL at it
# BOOST_GPU_LIMIT_SCALE=F: every limit and the budget times F, for the CPU
# standing in for the GPU (ctest gpu_stages_cpu), F times slower
SCALE = float(os.environ.get("BOOST_GPU_LIMIT_SCALE", "1"))
BY_NAME = {s[0]: s for s in STAGES}
ORDER = [s[0] for s in STAGES]


def limit_of(name):
    return int(round(BY_NAME[name][2] * SCALE))


def static_plan(names, budget):
    """[(name, limit, fits)] if every stage took its whole limit."""
    used, out = 0, []
    for n in names:
        fits = used + limit_of(n) <= budget - RESERVE
        used += limit_of(n) if fits else 0
        out.append((n, limit_of(n), fits))
    return out


class Clock:
    """Real time, or the virtual time of a simulation."""

    def __init__(self, sim):
        self.sim, self.t0, self.virtual = sim, time.monotonic(), 0.0

    def elapsed(self):
        return self.virtual if self.sim is not None else time.monotonic() - self.t0


def run_real(script, name, limit, log):
    with open(log, "w") as f:
        env = dict(os.environ, BOOST_GPU_STAGE_LIMIT=str(limit - TERM_BEFORE))
        # through bash: the script's executable bit may not survive the journey
        p = subprocess.Popen(["bash", script, "--_stage", name], stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                             env=env)
        try:
            return p.wait(timeout=max(1, limit - TERM_BEFORE))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=TERM_BEFORE)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            return "timeout"


def run_sim(sim, clock, name, limit, log):
    spec = sim.get(name, {})
    secs = float(spec.get("seconds", BY_NAME[name][1]))
    clock.virtual += min(secs, limit)
    with open(log, "w") as f:
        if secs > limit:
            return "timeout"
        if "cmd" in spec:
            return subprocess.call(spec["cmd"], stdout=f, stderr=subprocess.STDOUT)
        f.write("".join(f"{line}\n" for line in spec.get("lines", [])))
        return int(spec.get("exit", 0))


# a verdict: "ok", "FAIL", "SLOW", "note" or "result", then ':' or a space
# (boost-gpu-check prints "FAIL bf16 gemm ...")
VERDICT = re.compile(r"^(ok|FAIL|SLOW|note|result)[: ]")
SHOWN = 10  # verdict lines echoed per stage: failures first


def verdict_lines(log):
    try:
        with open(log, errors="replace") as f:
            return [l.rstrip("\n") for l in f if VERDICT.match(l)]
    except OSError:
        return []


def shown_lines(lines):
    """The lines to echo: failures, then speed, then notes, then the rest."""
    rank = {"FAIL": 0, "SLOW": 1, "note": 2}
    rest = [l for l in lines if not l.startswith("result")]
    pick = sorted(rest, key=lambda l: rank.get(VERDICT.match(l).group(1), 3))[:SHOWN]
    if len(rest) > SHOWN:
        pick.append(f"({len(rest) - SHOWN} more verdict lines in the stage's log)")
    return pick


def classify(name, rc):
    if rc == "timeout":
        if name in TIMEOUT_NOT_RUN:
            return "skipped", "out of its time at its limit: not judged"
        return "failed", "killed at its limit (timeout)"
    if rc == 0:
        return "passed", ""
    if rc == 4:
        return "slow", "right, but a speed bar was not met (exit 4)"
    if rc == 77:
        return "skipped", "not judged (exit 77): a missing tool or result, or out of its own time"
    return "failed", f"exit {rc}"


def run_stages(script, logs, names, budget, nodev, sim, report):
    clock, rows, no_gpu = Clock(sim), [], False
    for n in names:
        row = {"stage": n, "estimate_s": BY_NAME[n][1], "limit_s": limit_of(n), "seconds": 0, "exit": None,
               "result": "", "reason": ""}
        rows.append(row)
        left = budget - RESERVE - clock.elapsed()
        if (no_gpu or nodev) and (BY_NAME[n][3] or n == "probe"):
            row.update(status="no-device", reason="--no-device" if nodev else "the probe found no usable GPU")
            continue
        if limit_of(n) > left:
            row.update(status="not-run", reason=f"needs {limit_of(n)} s, {max(0, int(left))} s of the budget left")
            print(f"== {n:<8} not run: {row['reason']}", flush=True)
            continue
        print(f"== {n:<8} (limit {limit_of(n):3d} s) ... ", end="", flush=True)
        log, t = os.path.join(logs, f"{n}.log"), clock.elapsed()
        rc = run_sim(sim, clock, n, limit_of(n), log) if sim is not None else run_real(script, n, limit_of(n), log)
        row["seconds"], row["exit"] = round(clock.elapsed() - t, 1), rc
        row["status"], row["reason"] = classify(n, rc)
        lines = verdict_lines(log)
        # the result line, else the first failure, else the first verdict
        pick = [l for l in lines if l.startswith("result")] or [l for l in lines if l.startswith("FAIL")] or lines
        row["result"] = VERDICT.sub("", pick[0]).strip() if pick else ""
        row["verdicts"] = shown_lines(lines)
        print(f"{row['status']} ({row['seconds']:.0f} s){' - ' + row['reason'] if row['reason'] else ''}")
        for l in row["verdicts"]:
            print(f"     {l}")
        if n == "probe" and row["status"] != "passed":
            row["status"], no_gpu = "no-device", True
        report(rows, clock.elapsed(), quiet=True)
    return rows, clock.elapsed()


def exit_code(rows):
    st = [r["status"] for r in rows]
    if "failed" in st:
        return 1
    if "no-device" in st:
        return 77
    if "not-run" in st or "skipped" in st:
        return 3
    if "slow" in st:
        return 4
    return 0


GROUPS = [("passed", "passed"), ("failed", "FAILED (a wrong result, a crash or a hang)"),
          ("slow", "right but SLOW (a speed bar not met; figures below)"),
          ("skipped", "not run: skipped (a missing tool or result, or out of its own time)"),
          ("not-run", "not run (does not fit the budget)"), ("no-device", "no GPU")]


def figures(logs):
    """Every figure file a stage wrote (LOGS/NAME.json), by name."""
    out = {}
    for f in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        if f.endswith(".json") and f != "summary.json":
            try:
                with open(os.path.join(logs, f)) as fh:
                    out[f[:-5]] = json.load(fh)
            except (OSError, ValueError) as e:
                out[f[:-5]] = {"unreadable": str(e)}
    return out


# what logs.tar.xz leaves out: checkpoints, token shards, anything large
PACK_SKIP = re.compile(r"\.(h5|tok|bin|tmp)$")
PACK_FILE_MAX = 8 << 20
PACK_MAX = 15 << 20  # the report's files come back at 16 MiB each at most


def pack_logs(logs, out):
    """LOGS's text into OUT/logs.tar.xz (written beside, renamed when whole;
    a whole-log archive over PACK_MAX keeps only the stage logs)."""
    files = []
    for d, dirs, fs in os.walk(logs):
        dirs.sort()
        for f in sorted(fs):
            p = os.path.join(d, f)
            if os.path.isfile(p) and not os.path.islink(p) and not PACK_SKIP.search(f) and \
                    os.path.getsize(p) <= PACK_FILE_MAX:
                files.append(p)
    try:
        import lzma  # noqa: F401 -- a Python built without it packs gzip instead
        dst, mode = os.path.join(out, "logs.tar.xz"), "w:xz"
    except ImportError:
        dst, mode = os.path.join(out, "logs.tar.gz"), "w:gz"
    for keep in (files, [p for p in files if os.path.dirname(p) == logs]):
        with tarfile.open(dst + ".part", mode) as t:
            for p in keep:
                t.add(p, arcname=os.path.join("logs", os.path.relpath(p, logs)))
        if os.path.getsize(dst + ".part") <= PACK_MAX:
            break
    os.replace(dst + ".part", dst)


def summary(rows, elapsed, budget, out, gpu_line, logs=None, quiet=False):
    rc = exit_code(rows)
    text = [f"boost GPU check, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, {elapsed:.0f} s of {budget} s"]
    if gpu_line:
        text.append(gpu_line)
    text.append(f"{'stage':<9} {'status':<9} {'limit':>5} {'took':>5}  result")
    for key, title in GROUPS:
        group = [r for r in rows if r["status"] == key]
        if not group:
            continue
        text.append(f"-- {title}: {len(group)}")
        for r in group:
            detail = r["result"] or r["reason"]
            if r["result"] and r["reason"]:
                detail = f"{r['reason']}; {r['result']}"
            text.append(f"{r['stage']:<9} {r['status']:<9} {r['limit_s']:>5} {r['seconds']:>5.0f}  {detail}")
            if key in ("failed", "slow"):
                text.extend(f"{'':<32}{l}" for l in r.get("verdicts", []) if l.startswith(("FAIL", "SLOW")))
    counts = ", ".join(f"{sum(r['status'] == k for r in rows)} {k}" for k, _ in GROUPS)
    text.append(f"totals: {counts}; exit {rc}")
    text.append("exit: 0 all passed; 1 a wrong result; 77 no GPU; 3 incomplete (not run, skipped); 4 right but "
                "a speed bar missed")
    body = {"budget_s": budget, "elapsed_s": round(elapsed, 1), "exit": rc, "stages": rows,
            "figures": figures(logs or out)}
    for d in {out, logs or out}:
        for name, data in (("summary.txt", "\n".join(text) + "\n"), ("summary.json", json.dumps(body, indent=1))):
            with open(os.path.join(d, name + ".part"), "w") as f:
                f.write(data)
            os.replace(os.path.join(d, name + ".part"), os.path.join(d, name))
    if not quiet:
        print("\n".join(text))
    return rc


def parse(argv):
    opts = {"budget": os.environ.get("BOOST_GPU_BUDGET_S", str(BUDGET)), "nodev": False, "self": None, "out": None,
            "logs": None}
    names = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--budget", "--self", "--out", "--logs"):
            if i + 1 >= len(argv):
                raise ValueError(f"{a} needs a value")
            opts[a[2:]] = argv[i + 1]
            i += 1
        elif a == "--no-device":
            opts["nodev"] = True
        elif a in BY_NAME:
            names.append(a)
        else:
            raise ValueError(f"no stage or option '{a}' (stages: {' '.join(ORDER)})")
        i += 1
    try:
        opts["budget"] = int(int(opts["budget"]) * SCALE)
    except ValueError:
        raise ValueError(f"--budget needs whole seconds, not '{opts['budget']}'")
    if opts["budget"] <= 0:
        raise ValueError("--budget needs a positive number of seconds")
    # a GPU stage needs the probe's answer first
    if any(BY_NAME[n][3] for n in names):
        names.append("probe")
    # priority order, whatever order they were named in; each once
    return opts, [n for n in ORDER if n in names]


def main(argv):
    if len(argv) < 2 or argv[1] not in ("table", "plan", "run"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        opts, names = parse(argv[2:])
    except ValueError as e:
        print(f"gpu_plan: {e}", file=sys.stderr)
        return 2
    if argv[1] == "table":
        for n, est, lim, gpu, what in STAGES:
            print(f"{n:<9} {est:>4} s {lim:>4} s  {'GPU ' if gpu else '    '} {what}")
        print(f"{'total':<9} {sum(s[1] for s in STAGES):>4} s {sum(s[2] for s in STAGES):>4} s  (budget {BUDGET} s, "
              f"{RESERVE} s reserved)")
        return 0
    names = names or ORDER
    if argv[1] == "plan":
        plan = static_plan(names, opts["budget"])
        for n, lim, fits in plan:
            print(f"{n:<9} {lim:>4} s  {'runs' if fits else 'not-run (does not fit)'}")
        print(f"total {sum(l for _, l, f in plan if f)} s of {opts['budget']} s ({RESERVE} s reserved)")
        return 0 if all(f for _, _, f in plan) else 1
    if not opts["out"] or (not opts["self"] and "BOOST_GPU_PLAN_SIM" not in os.environ):
        print("gpu_plan: run needs --out DIR and --self SCRIPT", file=sys.stderr)
        return 2
    sim = None
    if os.environ.get("BOOST_GPU_PLAN_SIM"):
        with open(os.environ["BOOST_GPU_PLAN_SIM"]) as f:
            sim = json.load(f)
    out = opts["out"]
    logs = opts["logs"] or out
    os.makedirs(out, exist_ok=True)
    os.makedirs(logs, exist_ok=True)

    def report(rows, elapsed, quiet=False):
        env = os.path.join(logs, "env.log")
        gpu_line = next((l.rstrip() for l in open(env, errors="replace") if l.startswith("gpu:")), "") \
            if os.path.exists(env) else ""
        return summary(rows, elapsed, opts["budget"], out, gpu_line, logs, quiet)

    rows, elapsed = run_stages(opts["self"], logs, names, opts["budget"], opts["nodev"], sim, report)
    rc = report(rows, elapsed)
    if os.path.realpath(logs) != os.path.realpath(out):
        pack_logs(logs, out)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
