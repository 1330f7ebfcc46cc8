#!/usr/bin/env python3
"""Verdicts and figures for tests/gpu/run_gpu_check.sh, from boost-train's
train.metrics files (one JSON object per step), checkpoint records and the
tools' --json output. Each command prints its figures with a verdict first
("ok:", "FAIL:", "SLOW:" or "note:") and exits 0 (pass), 1 (a wrong or
missing result), 4 (right, but a speed bar is not met) or 77 (nothing to
judge against: not judged):

  gpu_compare.py losses A.jsonl B.jsonl RTOL [FIRST_STEP [GN_RTOL]]
      every step both have (from FIRST_STEP): the loss within RTOL and the
      gradient norm within GN_RTOL (default 10 x RTOL: the norm sums
      squares over every parameter, so it drifts faster) relative to B
  gpu_compare.py same A.jsonl B.jsonl
      loss and gradient norm identical at every step (bit for bit as
      printed: cJSON writes 17 significant digits)
  gpu_compare.py bench BOOST.jsonl TORCH.json PEAK_TFLOPS SKIP OUT.json
      boost's median tokens/s and TFLOP/s over the steps after SKIP beside
      PyTorch's; the bars: boost / torch >= BOOST_GPU_BAR_RATIO (1.3) and
      MFU (against PEAK_TFLOPS) >= BOOST_GPU_BAR_MFU (0.40). A bar missed:
      4; a bar that cannot be judged (no PyTorch result; PEAK_TFLOPS 0,
      unknown) and none missed: 77; boost's own run without steps or with
      a loss that is not finite: 1
  gpu_compare.py stall ASYNC_DIR SYNC_DIR OUT.json
      median stall per checkpoint (async, the final one excluded) against
      the median synchronous save (<dir>/checkpoints.jsonl); the bar: the
      share <= BOOST_GPU_BAR_STALL (0.01), else 4; no records: 1
  gpu_compare.py decode CPU_GEN.json CUDA_GEN.json NOCACHE_GEN.json CPU_EVAL.json CUDA_EVAL.json RTOL OUT.json
      boost-generate --json on the CPU and on the GPU (with its KV cache, and
      without: --no-cache), the same checkpoint, prompt, sampling and seed:
      the same new tokens all three; boost-eval --json's loss on the GPU
      within RTOL of the CPU's"""
import json
import math
import os
import statistics
import sys


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def by_step(path):
    return {m["step"]: m for m in lines(path)}


def bar(name, default):
    return float(os.environ.get(name, default))


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def losses(a, b, rtol, first=1, gn_rtol=None):
    gn_rtol = 10 * rtol if gn_rtol is None else gn_rtol
    A, B = by_step(a), by_step(b)
    steps = sorted(s for s in A if s in B and s >= first)
    if not steps:
        print(f"FAIL: no common steps in {a} and {b}")
        return 1
    wl = max(steps, key=lambda s: rel(A[s]["loss"], B[s]["loss"]))
    wg = max(steps, key=lambda s: rel(A[s]["grad_norm"], B[s]["grad_norm"]))
    lr, gr = rel(A[wl]["loss"], B[wl]["loss"]), rel(A[wg]["grad_norm"], B[wg]["grad_norm"])
    finite = all(math.isfinite(A[s]["loss"]) and math.isfinite(A[s]["grad_norm"]) for s in steps)
    ok = finite and lr <= rtol and gr <= gn_rtol
    print(f"{'ok' if ok else 'FAIL'}: steps {steps[0]}..{steps[-1]}: loss max relative difference {lr:.2e} "
          f"(step {wl}: {A[wl]['loss']:.7g} vs {B[wl]['loss']:.7g}; tolerance {rtol:g}), grad norm {gr:.2e} "
          f"(step {wg}: {A[wg]['grad_norm']:.7g} vs {B[wg]['grad_norm']:.7g}; tolerance {gn_rtol:g})"
          + ("" if finite else "; NOT FINITE"))
    return 0 if ok else 1


def same(a, b):
    A, B = by_step(a), by_step(b)
    diff = [s for s in sorted(A) if s not in B or (A[s]["loss"], A[s]["grad_norm"]) != (B[s]["loss"], B[s]["grad_norm"])]
    ok = A and not diff
    print(f"{'ok' if ok else 'FAIL'}: {len(A)} steps, {len(diff)} differ" + (f" (first: step {diff[0]})" if diff else ""))
    return 0 if ok else 1


def torch_result(path):
    try:
        with open(path) as f:
            t = json.load(f)
        return t if t.get("tokens_per_s", 0) > 0 else None
    except (OSError, ValueError, AttributeError):
        return None


def bench(boost, torch_json, peak, skip, out):
    peak, skip = float(peak), int(skip)
    min_ratio, min_mfu = bar("BOOST_GPU_BAR_RATIO", 1.3), bar("BOOST_GPU_BAR_MFU", 0.40)
    B = [m for m in lines(boost) if m["step"] > skip]
    if not B:
        print(f"FAIL: boost logged no step after {skip} ({boost})")
        return 1
    if not all(math.isfinite(m.get("loss", 0.0)) for m in B):
        print(f"FAIL: boost's loss is not finite ({boost})")
        return 1
    tps = statistics.median(m["tokens_per_s"] for m in B)
    tf = statistics.median(m["gflops"] for m in B) / 1e3
    mfu = tf / peak if peak > 0 else None
    T = torch_result(torch_json)
    ratio = tps / T["tokens_per_s"] if T else None
    r = {"boost_tokens_per_s": round(tps, 1), "boost_tflops": round(tf, 2), "boost_mfu": mfu and round(mfu, 4),
         "peak_tflops": peak or None, "boost_over_torch": ratio and round(ratio, 3), "bar_ratio": min_ratio,
         "bar_mfu": min_mfu, "torch": T}
    missed, unjudged = [], []
    print(f"boost: {tps:.0f} tokens/s, {tf:.1f} TFLOP/s" + (f", MFU {100 * mfu:.1f}%" if mfu is not None else ""))
    if T:
        print(f"torch: {T['tokens_per_s']:.0f} tokens/s, {T['tflops']:.1f} TFLOP/s ({T['dtype']}, compile "
              f"{T['compile']}, torch {T['torch_version']})")
        if ratio < min_ratio:
            missed.append(f"boost / torch = {ratio:.2f} below the bar {min_ratio:g}")
    else:
        unjudged.append("no PyTorch result (bench_torch.log): no ratio to judge")
    if mfu is None:
        unjudged.append("the GPU's peak is unknown (BOOST_GPU_PEAK_TFLOPS): no MFU to judge")
    elif mfu < min_mfu:
        missed.append(f"MFU {100 * mfu:.1f}% below the bar {100 * min_mfu:g}%")
    r["pass"] = not missed and not unjudged
    r["bars_missed"], r["not_judged"] = missed, unjudged
    with open(out, "w") as f:
        json.dump(r, f)
    figures = (f"boost / torch = {ratio:.2f}" if ratio else "boost / torch = ?") + \
        (f", MFU {100 * mfu:.1f}%" if mfu is not None else ", MFU ?") + f" (bars {min_ratio:g}, {100 * min_mfu:g}%)"
    if missed:
        print(f"SLOW: {figures}: {'; '.join(missed + unjudged)}")
        return 4
    if unjudged:
        print(f"note: {figures}: not judged: {'; '.join(unjudged)}")
        return 77
    print(f"ok: {figures}")
    return 0


def stall(async_dir, sync_dir, out):
    max_share = bar("BOOST_GPU_BAR_STALL", 0.01)
    try:
        a = lines(f"{async_dir}/checkpoints.jsonl")
        s = lines(f"{sync_dir}/checkpoints.jsonl")
    except (OSError, ValueError) as e:
        print(f"FAIL: no checkpoint records: {e}")
        return 1
    if not a or not s:
        print(f"FAIL: no checkpoint records ({len(a)} async, {len(s)} synchronous)")
        return 1
    final = max(c["step"] for c in a)
    nonfinal = [c["stall_s"] for c in a if c["step"] != final] or [c["stall_s"] for c in a]
    st, sy = statistics.median(nonfinal), statistics.median(c["stall_s"] for c in s)
    share = st / sy if sy > 0 else float("nan")
    ok = share <= max_share  # NaN fails
    with open(out, "w") as f:
        json.dump({"stall_s": st, "sync_s": sy, "ratio": share, "bar": max_share, "pass": ok, "async": a, "sync": s}, f)
    print(f"{'ok' if ok else 'SLOW'}: stall per checkpoint (async, median of {len(nonfinal)}): {1e3 * st:.1f} ms; "
          f"synchronous save: {1e3 * sy:.0f} ms; stall / sync = {100 * share:.2f}% (bar {100 * max_share:g}%)")
    return 0 if ok else 4


def decode(cpu_gen, cuda_gen, nocache_gen, cpu_eval, cuda_eval, rtol, out):
    rtol = float(rtol)
    gens = {}
    for name, path in (("cpu", cpu_gen), ("cuda", cuda_gen), ("cuda_no_cache", nocache_gen)):
        with open(path) as f:
            gens[name] = json.load(f)
    with open(cpu_eval) as f:
        ec = json.load(f)
    with open(cuda_eval) as f:
        eg = json.load(f)
    ref = gens["cpu"]["tokens"]
    fails = []
    for name in ("cuda", "cuda_no_cache"):
        t = gens[name]["tokens"]
        if t != ref:
            at = next((i for i, (a, b) in enumerate(zip(t, ref)) if a != b), min(len(t), len(ref)))
            fails.append(f"{name} tokens differ from the cpu's at new token {at} ({len(t)} vs {len(ref)} tokens)")
    if not ref:
        fails.append("the cpu generated no token")
    lc, lg = ec["loss"], eg["loss"]
    lr = rel(lg, lc) if math.isfinite(lg) and math.isfinite(lc) else float("inf")
    if not lr <= rtol:
        fails.append(f"boost-eval loss {lg:.7g} on cuda vs {lc:.7g} on the cpu (relative {lr:.2e} > {rtol:g})")
    r = {"tokens": len(ref), "same_tokens": not any("tokens differ" in x for x in fails),
         "eval_loss_cpu": lc, "eval_loss_cuda": lg, "eval_loss_rel": lr, "rtol": rtol,
         "tokens_per_s": {k: g.get("tokens_per_s") for k, g in gens.items()},
         "prefill_s": {k: g.get("prefill_s") for k, g in gens.items()}, "pass": not fails}
    with open(out, "w") as f:
        json.dump(r, f)
    figures = f"{len(ref)} sampled tokens, eval loss {lg:.7g} vs {lc:.7g} (relative {lr:.2e}, tolerance {rtol:g})"
    print(f"ok: {figures}: the same tokens with and without the KV cache" if not fails
          else f"FAIL: {figures}: {'; '.join(fails)}")
    return 0 if not fails else 1


def main(argv):
    cmds = {"losses": (losses, 3, 5), "same": (same, 2, 2), "bench": (bench, 5, 5), "stall": (stall, 3, 3),
            "decode": (decode, 7, 7)}
    if len(argv) < 2 or argv[1] not in cmds or not cmds[argv[1]][1] <= len(argv) - 2 <= cmds[argv[1]][2]:
        print(__doc__, file=sys.stderr)
        return 2
    args = argv[2:]
    try:
        if argv[1] == "losses":
            return losses(args[0], args[1], float(args[2]), int(args[3]) if len(args) > 3 else 1,
                          float(args[4]) if len(args) > 4 else None)
        return cmds[argv[1]][0](*args)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"FAIL: {argv[1]}: {type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
