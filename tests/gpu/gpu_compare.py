#!/usr/bin/env python3
"""Verdicts and figures for tests/gpu/run_gpu_check.sh, from boost-train's
train.metrics files (one JSON object per step) and checkpoint records:

  gpu_compare.py losses A.jsonl B.jsonl RTOL [FIRST_STEP]
      the loss of every step both have (from FIRST_STEP): max relative
      difference <= RTOL -> exit 0, else 1
  gpu_compare.py same A.jsonl B.jsonl
      loss and gradient norm identical at every step (bit for bit as
      printed: cJSON writes 17 significant digits) -> exit 0, else 1
  gpu_compare.py bench BOOST.jsonl TORCH.json PEAK_TFLOPS SKIP OUT.json
      boost's median tokens/s and TFLOP/s over the steps after SKIP, beside
      PyTorch's; MFU against PEAK_TFLOPS (0: unknown); the ratio
  gpu_compare.py stall ASYNC_DIR SYNC_DIR OUT.json
      median stall per checkpoint (async, final one excluded) against the
      median synchronous save (<dir>/checkpoints.jsonl)
Every command prints one line per figure."""
import json
import statistics
import sys


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def by_step(path):
    return {m["step"]: m for m in lines(path)}


def losses(a, b, rtol, first=1):
    A, B = by_step(a), by_step(b)
    steps = sorted(s for s in A if s in B and s >= first)
    if not steps:
        print(f"no common steps in {a} and {b}")
        return 1
    worst = max(steps, key=lambda s: abs(A[s]["loss"] - B[s]["loss"]) / abs(B[s]["loss"]))
    rel = abs(A[worst]["loss"] - B[worst]["loss"]) / abs(B[worst]["loss"])
    gn = max(abs(A[s]["grad_norm"] - B[s]["grad_norm"]) / max(abs(B[s]["grad_norm"]), 1e-30) for s in steps)
    ok = rel <= rtol
    print(f"{'ok' if ok else 'FAIL'}: steps {steps[0]}..{steps[-1]}: loss max relative difference {rel:.2e} "
          f"(step {worst}: {A[worst]['loss']:.7g} vs {B[worst]['loss']:.7g}), tolerance {rtol:g}; "
          f"grad norm max relative difference {gn:.2e}")
    return 0 if ok else 1


def same(a, b):
    A, B = by_step(a), by_step(b)
    diff = [s for s in sorted(A) if s not in B or (A[s]["loss"], A[s]["grad_norm"]) != (B[s]["loss"], B[s]["grad_norm"])]
    print(f"{'ok' if not diff else 'FAIL'}: {len(A)} steps, {len(diff)} differ" + (f" (first: step {diff[0]})" if diff else ""))
    return 0 if not diff else 1


def bench(boost, torch_json, peak, skip, out):
    peak, skip = float(peak), int(skip)
    B = [m for m in lines(boost) if m["step"] > skip]
    tps = statistics.median(m["tokens_per_s"] for m in B)
    tf = statistics.median(m["gflops"] for m in B) / 1e3
    try:
        T = json.load(open(torch_json))
    except (OSError, ValueError):
        T = None
    r = {"boost_tokens_per_s": round(tps, 1), "boost_tflops": round(tf, 2),
         "boost_mfu": round(tf / peak, 4) if peak > 0 else None, "peak_tflops": peak or None}
    print(f"boost: {tps:.0f} tokens/s, {tf:.1f} TFLOP/s" + (f", MFU {100 * tf / peak:.1f}%" if peak > 0 else ""))
    if T:
        r.update({"torch_tokens_per_s": T["tokens_per_s"], "torch_tflops": T["tflops"],
                  "torch_mfu": round(T["tflops"] / peak, 4) if peak > 0 else None,
                  "boost_over_torch": round(tps / T["tokens_per_s"], 3), "torch": T})
        print(f"torch: {T['tokens_per_s']:.0f} tokens/s, {T['tflops']:.1f} TFLOP/s ({T['dtype']}, compile "
              f"{T['compile']}, torch {T['torch_version']}); boost / torch = {tps / T['tokens_per_s']:.2f} (bar: 1.3)")
    else:
        print("torch: no result (see bench_torch.log)")
    if peak > 0:
        print(f"MFU bar 40%: {'met' if tf / peak >= 0.40 else 'NOT met'}")
    json.dump(r, open(out, "w"))
    return 0


def stall(async_dir, sync_dir, out):
    a = lines(f"{async_dir}/checkpoints.jsonl")
    s = lines(f"{sync_dir}/checkpoints.jsonl")
    final = max(c["step"] for c in a)
    nonfinal = [c["stall_s"] for c in a if c["step"] != final] or [c["stall_s"] for c in a]
    st, sy = statistics.median(nonfinal), statistics.median(c["stall_s"] for c in s)
    ratio = st / sy if sy > 0 else float("nan")
    print(f"stall per checkpoint (async, median of {len(nonfinal)}): {1e3 * st:.1f} ms; synchronous save: "
          f"{1e3 * sy:.0f} ms; stall / sync = {100 * ratio:.2f}% (bar: 1%, {'met' if ratio <= 0.01 else 'NOT met'})")
    json.dump({"stall_s": st, "sync_s": sy, "ratio": ratio, "async": a, "sync": s}, open(out, "w"))
    return 0


def main(argv):
    cmds = {"losses": losses, "same": same, "bench": bench, "stall": stall}
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    args = argv[2:]
    if argv[1] == "losses":
        return losses(args[0], args[1], float(args[2]), int(args[3]) if len(args) > 3 else 1)
    return cmds[argv[1]](*args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
