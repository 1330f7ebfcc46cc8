#!/usr/bin/python3
"""PyTorch CPU peer of boost-train: the same model, optimizer and step, in
plain torch, for the training-throughput comparison (bench/bench_train.sh,
docs/PERFORMANCE.md).

    /usr/bin/python3 bench/torch_peer.py --preset cola-60m --batch 4 --seq 256 \
        --steps 12 --warmup 2 --threads 2 [--json]

Run it with Debian's /usr/bin/python3 (python3-torch 1.13 lives there), or
with the python of a virtual environment holding the current PyTorch wheel
(bench/bench_vs_torch.sh makes one). --mode picks what a user of that
PyTorch would turn on:
  eager    explicit attention matmuls + mask, AdamW foreach (works on 1.13)
  fast     F.scaled_dot_product_attention(is_causal=True) and AdamW fused=True
  compile  fast, and the model wrapped in torch.compile (inductor, C++ codegen)

The model is the one boost trains (docs/MODEL.md):
LLaMA-style decoder, embedding [V,d] without scaling; per layer
h = x + Attn(RMSNorm(x)), x' = h + MLP(RMSNorm(h)); final RMSNorm; untied LM
head [V,d]; mean cross-entropy over all B*T tokens. RMSNorm is
x * rsqrt(mean(x^2) + 1e-5) * w, no biases anywhere. Attention: q, k, v, o
d->d, RoPE (theta 10000) on interleaved pairs (2i, 2i+1), causal softmax with
explicit matmuls and a mask (torch 1.13 has no scaled_dot_product_attention).
Each projection is full-rank y = x W^T or CoLA y = silu(x A^T) B^T. The
low-rank MLP is down(gate(x) * up(x)); the full-rank twin is SwiGLU
down(silu(gate(x)) * up(x)). AdamW (lr 1e-3 constant, betas 0.9/0.95, eps 1e-8, wd 0.1 on matrices), fp32,
global grad-norm clip 1.0. Tokens are uniform random.

Throughput is the median tokens/s over the timed steps (the --warmup steps
before them are not timed). Each step also records how many cores other
processes kept busy meanwhile (/proc/stat minus this process); steps with
more than 0.1 core of other load count as contended, and
tokens_per_s_quiet is the median over the uncontended steps only. A step is zero_grad + forward + loss + backward +
clip + optimizer step, timed wall-clock.
"""
import argparse
import ctypes
import json
import math
import os
import re
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    # name: vocab, d, layers, heads, ffn, rank_attn, rank_mlp (0 = full rank)
    "tiny": dict(vocab=320, d=64, layers=4, heads=4, ffn=176, rank_attn=16, rank_mlp=16),
    "cola-60m": dict(vocab=32000, d=512, layers=8, heads=8, ffn=1376, rank_attn=128, rank_mlp=128),
    "cola-130m": dict(vocab=32000, d=768, layers=12, heads=12, ffn=2048, rank_attn=256, rank_mlp=256),
    "cola-350m": dict(vocab=32000, d=1024, layers=24, heads=16, ffn=2736, rank_attn=256, rank_mlp=256),
    "cola-1b": dict(vocab=32000, d=2048, layers=24, heads=32, ffn=5472, rank_attn=512, rank_mlp=512),
    "llama-tiny": dict(vocab=320, d=64, layers=4, heads=4, ffn=176, rank_attn=0, rank_mlp=0),
    "llama-60m": dict(vocab=32000, d=512, layers=8, heads=8, ffn=1376, rank_attn=0, rank_mlp=0),
    "llama-130m": dict(vocab=32000, d=768, layers=12, heads=12, ffn=2048, rank_attn=0, rank_mlp=0),
    "llama-350m": dict(vocab=32000, d=1024, layers=24, heads=16, ffn=2736, rank_attn=0, rank_mlp=0),
    "llama-1b": dict(vocab=32000, d=2048, layers=24, heads=32, ffn=5472, rank_attn=0, rank_mlp=0),
}

NORM_EPS = 1e-5
ROPE_THETA = 10000.0
FULL_INIT_STD = 0.02


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * self.weight


class Proj(nn.Module):
    """Full-rank y = x W^T (W [out,in]) when rank == 0, else CoLA
    y = silu(x A^T) B^T with A [r,in], B [out,r]."""

    def __init__(self, d_in, d_out, rank):
        super().__init__()
        self.rank = rank
        if rank:
            std = rank ** -0.25 * (d_in + d_out) ** -0.25
            self.A = nn.Parameter(torch.randn(rank, d_in) * std)
            self.B = nn.Parameter(torch.randn(d_out, rank) * std)
        else:
            self.W = nn.Parameter(torch.randn(d_out, d_in) * FULL_INIT_STD)

    def forward(self, x):
        if self.rank:
            return F.linear(F.silu(F.linear(x, self.A)), self.B)
        return F.linear(x, self.W)


def rope_tables(seq, hd):
    # angle(t, i) = t * theta^(-2i/hd), i = 0 .. hd/2-1, applied to pair (2i, 2i+1)
    inv = ROPE_THETA ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()  # [T, hd/2]


def apply_rope(x, cos, sin):
    # x [B, T, H, hd]; interleaved pairs (x[2i], x[2i+1])
    B, T, H, hd = x.shape
    xp = x.reshape(B, T, H, hd // 2, 2)
    x0, x1 = xp[..., 0], xp[..., 1]
    c = cos[:T].view(1, T, 1, hd // 2)
    s = sin[:T].view(1, T, 1, hd // 2)
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).reshape(B, T, H, hd)


class Attention(nn.Module):
    sdpa = False  # set by --mode fast/compile

    def __init__(self, d, heads, rank, seq):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.q = Proj(d, d, rank)
        self.k = Proj(d, d, rank)
        self.v = Proj(d, d, rank)
        self.o = Proj(d, d, rank)
        cos, sin = rope_tables(seq, self.hd)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, d = x.shape
        H, hd = self.heads, self.hd
        q = apply_rope(self.q(x).view(B, T, H, hd), self.cos, self.sin).transpose(1, 2)
        k = apply_rope(self.k(x).view(B, T, H, hd), self.cos, self.sin).transpose(1, 2)
        v = self.v(x).view(B, T, H, hd).transpose(1, 2)
        if Attention.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(y.transpose(1, 2).reshape(B, T, d))
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd)) + self.mask[:T, :T]
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, d)
        return self.o(y)


class MLP(nn.Module):
    def __init__(self, d, ffn, rank):
        super().__init__()
        self.low_rank = bool(rank)
        self.gate = Proj(d, ffn, rank)
        self.up = Proj(d, ffn, rank)
        self.down = Proj(ffn, d, rank)

    def forward(self, x):
        if self.low_rank:  # each term is already a bottleneck: no extra SiLU
            return self.down(self.gate(x) * self.up(x))
        return self.down(F.silu(self.gate(x)) * self.up(x))  # SwiGLU


class Block(nn.Module):
    def __init__(self, cfg, seq):
        super().__init__()
        self.norm1 = RMSNorm(cfg["d"])
        self.attn = Attention(cfg["d"], cfg["heads"], cfg["rank_attn"], seq)
        self.norm2 = RMSNorm(cfg["d"])
        self.mlp = MLP(cfg["d"], cfg["ffn"], cfg["rank_mlp"])

    def forward(self, x):
        h = x + self.attn(self.norm1(x))
        return h + self.mlp(self.norm2(h))


class Model(nn.Module):
    def __init__(self, cfg, seq):
        super().__init__()
        self.embed = nn.Parameter(torch.randn(cfg["vocab"], cfg["d"]) * FULL_INIT_STD)
        self.layers = nn.ModuleList(Block(cfg, seq) for _ in range(cfg["layers"]))
        self.norm = RMSNorm(cfg["d"])
        self.head = nn.Parameter(torch.randn(cfg["vocab"], cfg["d"]) * FULL_INIT_STD)

    def forward(self, tokens, targets):
        x = F.embedding(tokens, self.embed)
        for layer in self.layers:
            x = layer(x)
        logits = F.linear(self.norm(x), self.head)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def proj_params(d_in, d_out, rank):
    return rank * (d_in + d_out) if rank else d_in * d_out


def flops_per_token(cfg, seq):
    """Model FLOPs of one training step per token, counted exactly as
    boost-train counts them (trainer/model/model.c model_flops_per_token), so the
    GFLOP/s of both sides are comparable: 6 per weight of every projection and
    the LM head (forward 2, backward 4), plus 6 * 2 * layers * d * (T+1)/2 for
    QK^T and PV over the (T+1)/2 keys a query sees on average under the causal
    mask. Element-wise work (norms, RoPE, softmax, SiLU, Adam) is not counted.
    (The peer computes the full T x T scores and masks them, so it executes
    more attention FLOPs than it is credited with.)"""
    d, ffn, ra, rm = cfg["d"], cfg["ffn"], cfg["rank_attn"], cfg["rank_mlp"]
    per_layer = 4 * proj_params(d, d, ra) + 2 * proj_params(d, ffn, rm) + proj_params(ffn, d, rm)
    matmul = cfg["layers"] * per_layer + cfg["vocab"] * d
    attention = 2.0 * cfg["layers"] * d * (seq + 1) / 2.0
    return 6.0 * matmul + 6.0 * attention


def cpu_jiffies():
    """(busy jiffies of the whole machine, jiffies of this process) so that
    a step can tell how much CPU other processes took while it ran."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        with open("/proc/self/stat") as f:
            st = f.read().rsplit(")", 1)[1].split()
        return sum(v) - v[3] - v[4], int(st[11]) + int(st[12])
    except (OSError, ValueError, IndexError):
        return None


def foreign_cores(before, after, dt):
    """Average number of cores other processes kept busy between samples."""
    if before is None or after is None or dt <= 0:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return max(0.0, ((after[0] - before[0]) - (after[1] - before[1])) / tick / dt)


def openblas_handle():
    """The OpenBLAS this process has loaded (torch links libblas.so.3, which
    Debian's alternatives point at OpenBLAS), or None."""
    for name in ("libopenblas.so.0", "libblas.so.3"):
        try:
            h = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        except OSError:
            continue
        if hasattr(h, "openblas_get_corename"):
            return h
    return None


def blas_report():
    cfg = torch.__config__.show()
    m = re.search(r"BLAS_INFO=([^,\s]*)", cfg)
    blas_info = m.group(1) if m else ""
    libs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            base = os.path.basename(path)
            if any(s in base for s in ("blas", "lapack", "mkl", "dnnl", "blis")):
                libs.add(path)
    rep = {
        "torch_blas_info": blas_info,
        "torch_config_mentions_openblas": "openblas" in cfg.lower(),
        "blas_libs_loaded": sorted(libs),
        "openblas_core": None,
        "openblas_config": None,
        "openblas_threads": None,
    }
    h = openblas_handle()
    if h is not None:
        h.openblas_get_corename.restype = ctypes.c_char_p
        h.openblas_get_config.restype = ctypes.c_char_p
        rep["openblas_core"] = h.openblas_get_corename().decode()
        rep["openblas_config"] = h.openblas_get_config().decode()
        rep["openblas_threads"] = h.openblas_get_num_threads()
    return rep


def cpu_capability():
    """The instruction set PyTorch dispatches its own kernels to, and whether
    oneDNN (mkldnn, which runs its bf16 matmuls) reports bf16 support."""
    cap = ""
    try:
        cap = torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        pass
    try:
        if torch.ops.mkldnn._is_mkldnn_bf16_supported():
            cap += " onednn-bf16"
    except (AttributeError, RuntimeError):
        pass
    return cap.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="cola-60m", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before the timed ones")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--foreach", choices=("auto", "on", "off"), default="on",
                    help="torch.optim.AdamW foreach implementation (on: multi-tensor, the faster on CPU)")
    ap.add_argument("--mode", choices=("eager", "fast", "compile"), default="eager",
                    help="eager: explicit attention, AdamW foreach; fast: SDPA + fused AdamW; compile: fast + torch.compile")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16) "
                         "(fp32 weights, AdamW and gradients, as autocast users train)")
    ap.add_argument("--ddp", type=int, default=1,
                    help="data-parallel processes (DistributedDataParallel over gloo on this machine); "
                         "--batch is per process, --threads per process; rank 0 reports the global tokens/s")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = ap.parse_args()
    if args.mode != "eager" and not hasattr(F, "scaled_dot_product_attention"):
        ap.error(f"--mode {args.mode} needs PyTorch 2 (this is {torch.__version__})")
    Attention.sdpa = args.mode != "eager"
    if args.batch < 1 or args.seq < 1 or args.steps < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("batch, seq, steps, threads must be >= 1 and warmup >= 0")

    cfg = PRESETS[args.preset]
    if cfg["d"] % cfg["heads"] or (cfg["d"] // cfg["heads"]) % 2:
        ap.error("d must split into heads of even size")
    if args.ddp < 1:
        ap.error("--ddp must be >= 1")
    if args.ddp == 1:
        return train(args, cfg, 0, 1)
    import torch.multiprocessing as mp
    port = 29500 + os.getpid() % 2000
    mp.spawn(ddp_worker, args=(args, cfg, port), nprocs=args.ddp, join=True)
    return 0


def ddp_worker(rank, args, cfg, port):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.ddp)
    try:
        train(args, cfg, rank, args.ddp)
    finally:
        dist.destroy_process_group()


def train(args, cfg, rank, world):
    torch.set_num_threads(args.threads)
    h = openblas_handle()
    if h is not None:  # torch does not know its BLAS is OpenBLAS: set its pool too
        h.openblas_set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    model = Model(cfg, args.seq)
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    foreach = {"auto": None, "on": True, "off": False}[args.foreach]
    # decoupled weight decay on matrices only (as boost: not on RMSNorm gains)
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    if args.mode == "eager":
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, foreach=foreach)
    else:
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
    step_model = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP
        step_model = DDP(model)
    if args.mode == "compile":
        step_model = torch.compile(step_model)
    silent = rank != 0  # rank 0 reports

    gen = torch.Generator().manual_seed(args.seed + 1 + rank)
    ntok = args.batch * args.seq * world  # global tokens per step
    step_s, losses, foreign = [], [], []
    for step in range(args.warmup + args.steps):
        batch = torch.randint(0, cfg["vocab"], (args.batch, args.seq + 1), generator=gen)
        x, y = batch[:, :-1], batch[:, 1:]
        j0 = cpu_jiffies()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = step_model(x, y)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        lv = loss.item()
        dt = time.perf_counter() - t0
        fc = foreign_cores(j0, cpu_jiffies(), dt)
        losses.append(lv)
        if step >= args.warmup:
            step_s.append(dt)
            foreign.append(fc)
        if not args.json and not silent:
            tag = "warmup" if step < args.warmup else "step"
            print(f"{tag} {step:3d} loss {lv:.4f} grad_norm {float(gnorm):.3f} {dt * 1e3:8.1f} ms "
                  f"{ntok / dt:8.1f} tok/s" + ("" if fc is None else f"  other load {fc:.2f} cores"), flush=True)

    tps = [ntok / s for s in step_s]
    fpt = flops_per_token(cfg, args.seq)
    med_tps = statistics.median(tps)
    # steps during which other processes took more than 0.1 core on average
    quiet = [t for t, fc in zip(tps, foreign) if fc is not None and fc <= 0.1]
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    out = {
        "impl": "torch",
        "preset": args.preset,
        "batch": args.batch,
        "seq": args.seq,
        "steps": args.steps,
        "warmup": args.warmup,
        "threads": args.threads,
        "ddp": world,
        "params": n_params,
        "tokens_per_s": round(med_tps, 2),
        "tokens_per_s_min": round(min(tps), 2),
        "tokens_per_s_max": round(max(tps), 2),
        "step_ms": round(1e3 * statistics.median(step_s), 2),
        "tokens_per_s_steps": [round(t, 2) for t in tps],
        "other_load_cores_steps": [None if fc is None else round(fc, 2) for fc in foreign],
        "steps_contended": sum(1 for fc in foreign if fc is not None and fc > 0.1),
        "tokens_per_s_quiet": round(statistics.median(quiet), 2) if quiet else None,
        "flops_per_token": round(fpt),
        "gflops": round(med_tps * fpt * 1e-9, 2),
        "loss_first": round(losses[0], 4),
        "loss_last": round(losses[-1], 4),
        "peak_rss_kib": rss_kib,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "adamw_foreach": args.foreach if args.mode == "eager" else "fused",
        "mode": args.mode,
        "precision": args.precision,
        "cpu_capability": cpu_capability(),
        "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE", ""),
    }
    out.update(blas_report())
    if silent:
        return 0
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{args.preset} B={args.batch} T={args.seq} threads={args.threads}: params {n_params / 1e6:.2f} M, "
              f"median {med_tps:.1f} tokens/s ({out['step_ms']:.0f} ms/step, {out['gflops']:.1f} GFLOP/s), "
              f"peak RSS {rss_kib / 1024:.0f} MiB, {out['steps_contended']} of {len(tps)} steps contended, BLAS {out['openblas_config'] or out['torch_blas_info']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
