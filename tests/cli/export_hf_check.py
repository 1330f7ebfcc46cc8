"""Checks one boost-export folder against the checkpoint it came from
(tests/cli/export_hf.sh runs it; docs/EXPORT.md).

- the safetensors header, byte by byte per the format (length, padding,
  __metadata__, contiguous offsets) and every tensor's values through
  safetensors.safe_open against the checkpoint's datasets (q/k rows of a
  LLaMA export permuted as transformers' own LLaMA converter does; bf16 by
  nearest-even);
- transformers loads it (AutoModelForCausalLM; remote code for CoLA only)
  with no missing or unexpected weights;
- the loss on the checkpoint's stored batch equals boost's (--boost-loss,
  from boost-eval; else a float64 numpy model written from docs/MODEL.md,
  run on the checkpoint's own tensors) within --rtol; in fp32, every
  layer's input equals the residual stream boost stored (ckpt.activations=all);
- greedy generate() of --new tokens (with the KV cache) equals boost's
  (--boost-tokens, from boost-generate; else the numpy model decoding
  without a cache), and equals transformers' own uncached decoding (fp32);
- a padded batch gives each sequence the logits it gets alone;
- the byte-level tokenizer encodes bytes as their values.
Usage: export_hf_check.py [--layout-only] CASES.json (a list of cases: see
main). --layout-only checks the safetensors files' headers and bytes
against the checkpoint with numpy and h5py alone (Debian's python3, no
virtual environment). Prints one JSON line of figures per case; any failed
check raises.
"""
import json
import os
import struct
import sys
from types import SimpleNamespace

import h5py
import numpy as np

if "--layout-only" not in sys.argv:  # the layout check needs numpy and h5py only
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer

ATTN, MLP = ("q", "k", "v"), ("gate", "up")
HF = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
      "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}


def source(f, layer, proj, factor):
    """The checkpoint array of one projection factor (A, B or W): its slice of a group, or its own dataset."""
    block = "attn" if proj in ATTN + ("o",) else "mlp"
    group = "qkv" if proj in ATTN else "gate_up" if proj in MLP else None
    if group and f"model/layers.{layer}.{block}.{group}.{factor}" in f:
        members = ATTN if group == "qkv" else MLP
        return f[f"model/layers.{layer}.{block}.{group}.{factor}"][members.index(proj)]
    name = f"model/layers.{layer}.{block}.{proj}.{factor}"
    return f[name][...] if name in f else None


def load_weights(f, n_layers):
    """{(layer, proj): ("W", w) or ("AB", a, b)} and the other tensors, as float64."""
    w = {"embed": f["model/embed.weight"][...].astype(np.float64), "final": f["model/final_norm"][...].astype(np.float64)}
    w["head"] = f["model/lm_head.weight"][...].astype(np.float64) if "model/lm_head.weight" in f else w["embed"]
    for i in range(n_layers):
        w[i, "attn_norm"] = f[f"model/layers.{i}.attn_norm"][...].astype(np.float64)
        w[i, "mlp_norm"] = f[f"model/layers.{i}.mlp_norm"][...].astype(np.float64)
        for p in HF:
            full = source(f, i, p, "W")
            w[i, p] = ("W", full.astype(np.float64)) if full is not None else (
                "AB", source(f, i, p, "A").astype(np.float64), source(f, i, p, "B").astype(np.float64))
    return w


def silu(x):
    return x / (1.0 + np.exp(-x))


def rms(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def proj(w, x):
    if w[0] == "W":
        return x @ w[1].T
    return silu(x @ w[1].T) @ w[2].T


def rope(x, theta):
    """x [B, T, H, hd], interleaved pairs (docs/MODEL.md)."""
    hd, t = x.shape[-1], np.arange(x.shape[1], dtype=np.float64)
    freq = theta ** (-2.0 * np.arange(hd // 2) / hd)
    ang = t[:, None] * freq[None, :]
    c = np.cos(ang).astype(np.float32).astype(np.float64)[None, :, None, :]
    s = np.sin(ang).astype(np.float32).astype(np.float64)[None, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = x0 * c - x1 * s, x0 * s + x1 * c
    return out


def reference_logits(w, cfg, tokens):
    """boost's forward (docs/MODEL.md) in float64: logits [B, T, V]."""
    eps, theta, H = cfg["model.norm_eps"], cfg["model.rope_theta"], cfg["model.n_heads"]
    x = w["embed"][tokens]
    B, T, d = x.shape
    causal = np.tril(np.ones((T, T), dtype=bool))
    for i in range(cfg["model.n_layers"]):
        a = rms(x, w[i, "attn_norm"], eps)
        q, k, v = (proj(w[i, p], a).reshape(B, T, H, d // H) for p in ATTN)
        q, k = rope(q, theta), rope(k, theta)
        s = np.einsum("bthe,bshe->bhts", q, k) / np.sqrt(d // H)
        s = np.where(causal, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        att = np.einsum("bhts,bshe->bthe", p, v).reshape(B, T, d)
        h = x + proj(w[i, "o"], att)
        m = rms(h, w[i, "mlp_norm"], eps)
        g = proj(w[i, "gate"], m)
        if w[i, "gate"][0] == "W":
            g = silu(g)
        x = h + proj(w[i, "down"], g * proj(w[i, "up"], m))
    return rms(x, w["final"], eps) @ w["head"].T


def reference_loss(w, cfg, tokens):
    logits = reference_logits(w, cfg, tokens)[:, :-1]
    logits = logits - logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return float(-np.take_along_axis(logp, tokens[:, 1:, None], -1).mean())


def reference_greedy(w, cfg, prompt, n, eot):
    seq = list(prompt)
    for _ in range(n):
        nxt = int(reference_logits(w, cfg, np.array([seq]))[0, -1].argmax())
        seq.append(nxt)
        if nxt == eot:
            break
    return seq[len(prompt):]


def check_header(path, want_dtype):
    """The safetensors layout, read as bytes; returns the tensor names in file order."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0, f"header length {n} is not a multiple of 8"
    text = raw[8 : 8 + n].decode("utf-8")
    assert text.rstrip(" ").endswith("}"), "the header must be JSON padded with spaces"
    header = json.loads(text)
    assert header.pop("__metadata__") == {"format": "pt"}, "__metadata__ must be {'format': 'pt'}"
    end, size = 0, {"F32": 4, "BF16": 2}
    for name, e in header.items():  # contiguous, in header order, C-order sizes
        assert e["dtype"] == want_dtype, (name, e["dtype"])
        assert e["data_offsets"][0] == end, f"{name}: offsets not contiguous"
        end = e["data_offsets"][1]
        assert end - e["data_offsets"][0] == int(np.prod(e["shape"])) * size[e["dtype"]], name
    assert 8 + n + end == len(raw), "data section size"
    return list(header)


def expected_tensor(f, name, kind, heads):
    """The checkpoint array that HF tensor `name` must hold."""
    fixed = {"model.embed_tokens.weight": "embed.weight", "model.norm.weight": "final_norm", "lm_head.weight": "lm_head.weight"}
    if name in fixed:
        return f["model/" + fixed[name]][...]
    parts = name.split(".")
    layer = int(parts[2])
    if parts[3] in ("input_layernorm", "post_attention_layernorm"):
        return f[f"model/layers.{layer}.{'attn_norm' if parts[3] == 'input_layernorm' else 'mlp_norm'}"][...]
    p = {v: k for k, v in HF.items()}[parts[3] + "." + parts[4]]
    arr = source(f, layer, p, "W" if parts[5] == "weight" else parts[5])
    if kind == "llama" and p in ("q", "k"):  # transformers' convert_llama_weights_to_hf permute()
        d1, d2 = arr.shape
        arr = arr.reshape(heads, d1 // heads // 2, 2, d2).transpose(0, 2, 1, 3).reshape(d1, d2)
    return arr


def check_padding(model, prompt):
    """A shorter sequence padded on the left or the right of a batch (as
    lm-eval-harness batches) gets the logits it gets alone."""
    short, pad = prompt[: len(prompt) // 2], len(prompt) - len(prompt) // 2
    with torch.no_grad():
        alone = model(torch.tensor([short])).logits[0]
        left = model(torch.tensor([[0] * pad + short, prompt]),
                     attention_mask=torch.tensor([[0] * pad + [1] * len(short), [1] * len(prompt)])).logits[0, pad:]
        right = model(torch.tensor([short + [0] * pad, prompt]),
                      attention_mask=torch.tensor([[1] * len(short) + [0] * pad, [1] * len(prompt)])).logits[0, : len(short)]
    for name, got in (("left", left), ("right", right)):
        dev = (got - alone).abs().max().item() / alone.abs().max().item()
        assert dev <= 1e-5, f"{name}-padded batch: logits differ by {dev:.3g} from the sequence alone"


def bf16_bits(x):
    """float32 -> bfloat16 bits, nearest-even (finite values)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def check_layout(f, a, cfg, files):
    """Header and raw bytes of every tensor against the checkpoint, numpy only."""
    names = []
    for path in files:
        names += check_header(path, "BF16" if a.dtype == "bf16" else "F32")
        raw = open(path, "rb").read()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8 : 8 + n])
        header.pop("__metadata__")
        for name, e in header.items():
            data = raw[8 + n + e["data_offsets"][0] : 8 + n + e["data_offsets"][1]]
            want = expected_tensor(f, name, a.kind, cfg["model.n_heads"])
            assert list(want.shape) == e["shape"], (name, want.shape, e["shape"])
            if a.dtype == "bf16":
                ok = np.array_equal(np.frombuffer(data, "<u2"), bf16_bits(want).ravel())
            else:
                ok = np.array_equal(np.frombuffer(data, "<f4"), np.ascontiguousarray(want, np.float32).ravel())
            assert ok, f"{name}: bytes differ from the checkpoint's values"
    assert len(set(names)) == len(names), "a tensor is stored twice"
    want = {"model.embed_tokens.weight", "model.norm.weight"} | ({"lm_head.weight"} if "model/lm_head.weight" in f else set())
    assert want <= set(names) and sum(".input_layernorm." in x for x in names) == cfg["model.n_layers"], sorted(names)[:5]
    return names


def check_tensors(f, a, cfg, files):
    """Every tensor again through safetensors.safe_open, as torch reads it."""
    for path in files:
        with safe_open(path, framework="pt") as st:
            for name in st.keys():
                got = st.get_tensor(name)
                want = torch.from_numpy(np.ascontiguousarray(expected_tensor(f, name, a.kind, cfg["model.n_heads"])))
                if a.dtype == "bf16":
                    want = want.to(torch.bfloat16)
                assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.shape)
                assert torch.equal(got, want), f"{name}: values differ from the checkpoint"


def main():
    """argv: one JSON file holding a list of cases, each an object with the
    keys export, ckpt, kind (cola|llama), dtype (fp32|bf16), rtol, prompt
    (token ids), new, and optionally boost_loss and boost_tokens."""
    layout_only = "--layout-only" in sys.argv
    for case in json.load(open(sys.argv[-1])):
        try:
            figures = (check_layout_case if layout_only else check_case)(SimpleNamespace(**{"boost_loss": None, "boost_tokens": None, **case}))
        except AssertionError as e:
            raise AssertionError(f"{case['export']} ({case['kind']}, {case['dtype']}): {e}") from None
        print(json.dumps(figures), flush=True)


def case_files(a):
    index = os.path.join(a.export, "model.safetensors.index.json")
    if not os.path.exists(index):
        return [os.path.join(a.export, "model.safetensors")]
    return sorted({os.path.join(a.export, v) for v in json.load(open(index))["weight_map"].values()})


def check_layout_case(a):
    f = h5py.File(a.ckpt, "r")
    names = check_layout(f, a, json.loads(f.attrs["config"]), case_files(a))
    return {"export": a.export, "layout": "ok", "tensors": len(names)}


def check_case(a):
    torch.manual_seed(0)
    f = h5py.File(a.ckpt, "r")
    cfg = json.loads(f.attrs["config"])
    conf = json.load(open(os.path.join(a.export, "config.json")))
    eot = conf.get("eos_token_id", -1)
    files = case_files(a)
    names = check_layout(f, a, cfg, files)
    check_tensors(f, a, cfg, files)

    model, info = AutoModelForCausalLM.from_pretrained(a.export, trust_remote_code=a.kind == "cola", torch_dtype="auto",
                                                       output_loading_info=True)
    model.eval()
    want_arch = "ColaForCausalLM" if a.kind == "cola" else "LlamaForCausalLM"
    assert type(model).__name__ == want_arch, type(model).__name__
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert model.dtype == (torch.bfloat16 if a.dtype == "bf16" else torch.float32), model.dtype

    tokens = f["activations/tokens"][...].astype(np.int64)
    w = load_weights(f, cfg["model.n_layers"])
    ref = a.boost_loss if a.boost_loss is not None else reference_loss(w, cfg, tokens)
    with torch.no_grad():
        out = model(torch.from_numpy(tokens), labels=torch.from_numpy(tokens), output_hidden_states=True)
    loss = out.loss.item()
    assert abs(loss - ref) <= a.rtol * abs(ref), f"loss {loss!r} vs boost's {ref!r}: beyond {a.rtol} relative"
    if a.dtype == "fp32":
        for i in range(cfg["model.n_layers"]):  # boost's residual stream (ckpt.activations=all)
            stored = f[f"activations/layers.{i}.input"][...].reshape(out.hidden_states[i].shape)
            dev = np.abs(out.hidden_states[i].numpy() - stored).max() / max(1.0, np.abs(stored).max())
            assert dev <= 1e-5, f"layer {i} input differs from boost's stored activations by {dev:.3g}"

    prompt = a.prompt
    ids = torch.tensor([prompt])
    with torch.no_grad():
        gen = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=a.new, do_sample=False,
                             pad_token_id=eot if eot >= 0 else None)[0, len(prompt):].tolist()
        uncached = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=a.new, do_sample=False,
                                  use_cache=False, pad_token_id=eot if eot >= 0 else None)[0, len(prompt):].tolist()
    if a.dtype == "fp32":  # in bf16 the two orders of rounding may break a near-tie differently
        assert gen == uncached, f"cached generate {gen} != uncached {uncached}"
        if a.boost_tokens is not None:
            theirs = a.boost_tokens
        else:
            theirs = reference_greedy(w, cfg, prompt, a.new, eot)
        strip = lambda s: s[:-1] if s and s[-1] == eot else s  # whether the end-of-text token is listed
        assert strip(gen) == strip(theirs), f"generate {gen} != boost's {theirs}"
        assert len(gen) == a.new or gen[-1] == eot, f"generate stopped early: {gen}"

    if a.dtype == "fp32":
        check_padding(model, prompt)
    if os.path.exists(os.path.join(a.export, "tokenizer.json")):
        tok = AutoTokenizer.from_pretrained(a.export)
        text = "Fortune: \u00e9t\u00e9!\n"
        assert tok.encode(text) == list(text.encode("utf-8")), tok.encode(text)
        assert tok.decode(list(text.encode("utf-8"))) == text
        assert tok.eos_token_id == eot
    return {"export": a.export, "kind": a.kind, "dtype": a.dtype, "tensors": len(names), "loss": loss,
                      "boost_loss": ref, "loss_from": "boost-eval" if a.boost_loss is not None else "numpy reference",
                      "generated": gen}


if __name__ == "__main__":
    sys.exit(main())
