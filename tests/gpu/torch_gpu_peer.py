#!/usr/bin/env python3
"""PyTorch on the GPU running the model boost trains (bench/torch_peer.py's
Model: the same layers, initialisation scales, AdamW settings and FLOP
count), for the throughput comparison of tests/gpu/run_gpu_check.sh:

    tests/gpu/torch_gpu_peer.py --preset cola-1b --batch 8 --seq 1024 \\
        --steps 10 --warmup 3 [--fp32] [--no-compile] [--json]

What a user would turn on: bf16 autocast (unless --fp32), SDPA attention
(F.scaled_dot_product_attention, flash), AdamW(fused=True), and the model
wrapped in torch.compile (unless --no-compile). A step is zero_grad +
forward + loss + backward + clip + optimizer step, timed with
torch.cuda.synchronize() around it; tokens/s is the median over the timed
steps (the warm-up steps, which include compilation, are not timed)."""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import torch  # noqa: E402

import torch_peer as tp  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="cola-1b", choices=sorted(tp.PRESETS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--fp32", action="store_true", help="no autocast: fp32 throughout")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_gpu_peer: PyTorch sees no CUDA device", file=sys.stderr)
        return 77
    cfg = tp.PRESETS[args.preset]
    tp.Attention.sdpa = True
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    model = tp.Model(cfg, args.seq).to(dev)
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = model if args.no_compile else torch.compile(model)
    gen = torch.Generator().manual_seed(args.seed + 1)
    ntok = args.batch * args.seq
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        batch = torch.randint(0, cfg["vocab"], (args.batch, args.seq + 1), generator=gen).to(dev)
        x, y = batch[:, :-1], batch[:, 1:]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=not args.fp32):
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item())
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    tps = ntok / statistics.median(times)
    fpt = tp.flops_per_token(cfg, args.seq)
    out = {"impl": "torch", "device": torch.cuda.get_device_name(0), "torch_version": torch.__version__,
           "preset": args.preset, "batch": args.batch, "seq": args.seq, "dtype": "fp32" if args.fp32 else "bf16-autocast",
           "compile": not args.no_compile, "steps": args.steps, "tokens_per_s": round(tps, 1),
           "step_ms": round(1e3 * statistics.median(times), 2), "flops_per_token": round(fpt),
           "tflops": round(tps * fpt / 1e12, 2), "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4),
           "params": sum(p.numel() for p in params),
           "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}
    print(json.dumps(out) if args.json else
          f"torch {out['device']}: {args.preset} B={args.batch} T={args.seq} {out['dtype']} compile={out['compile']}: "
          f"{tps:.0f} tokens/s, {out['tflops']:.1f} TFLOP/s, {out['step_ms']:.1f} ms/step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
