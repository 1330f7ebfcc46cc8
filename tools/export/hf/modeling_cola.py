# CoLA (low-rank bottleneck) causal language model for transformers, as
# boost trains it (boost's docs/MODEL.md is the definition; this file is
# tools/hf/modeling_cola.py in the boost repository, written into every
# folder boost-export makes for a low-rank model).
#
# Differences from LLaMA: a low-rank projection is y = silu(x A^T) B^T
# (A: [r, in], B: [out, r]), a low-rank gate gets no further activation
# (G = identity; a full-rank gate keeps SiLU), and RoPE rotates interleaved
# pairs (2i, 2i+1), as Meta's LLaMA code does, with the tables computed in
# double precision.
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

try:
    from transformers import GenerationMixin
except ImportError:  # older releases: PreTrainedModel is the mixin
    GenerationMixin = object
try:
    from transformers.cache_utils import Cache, DynamicCache
except ImportError:  # releases before the Cache classes: tuples only
    Cache, DynamicCache = (), None

from .configuration_cola import ColaConfig


class ColaRMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class ColaLinear(nn.Module):
    """A projection: full-rank (weight [out, in]) or CoLA (A [r, in], B [out, r])."""

    def __init__(self, n_in, n_out, rank, lowrank):
        super().__init__()
        self.lowrank = lowrank
        if lowrank:
            self.A = nn.Parameter(torch.empty(rank, n_in))
            self.B = nn.Parameter(torch.empty(n_out, rank))
        else:
            self.weight = nn.Parameter(torch.empty(n_out, n_in))

    def forward(self, x):
        if self.lowrank:
            return F.linear(F.silu(F.linear(x, self.A)), self.B)
        return F.linear(x, self.weight)


def rope_tables(positions, head_dim, theta, dtype):
    """cos and sin [..., head_dim/2] for integer positions, computed in double."""
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)
    freq = torch.pow(torch.tensor(float(theta), dtype=torch.float64), -2.0 * i / head_dim)
    angle = positions.to(torch.float64)[..., None] * freq
    return torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)


def apply_rope(x, cos, sin):
    """x [B, H, S, hd]; cos, sin [B, S, hd/2]: rotates pairs (2i, 2i+1)."""
    c, s = cos[:, None], sin[:, None]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


class ColaAttention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        d, r, lr = config.hidden_size, config.rank_attn, set(config.lowrank)
        self.layer_idx = layer_idx
        self.n_heads = config.num_attention_heads
        self.head_dim = d // self.n_heads
        self.q_proj = ColaLinear(d, d, r, "q" in lr)
        self.k_proj = ColaLinear(d, d, r, "k" in lr)
        self.v_proj = ColaLinear(d, d, r, "v" in lr)
        self.o_proj = ColaLinear(d, d, r, "o" in lr)

    def forward(self, x, cos, sin, mask, cache):
        b, s, _ = x.shape
        shape = (b, s, self.n_heads, self.head_dim)
        q = apply_rope(self.q_proj(x).view(shape).transpose(1, 2), cos, sin)
        k = apply_rope(self.k_proj(x).view(shape).transpose(1, 2), cos, sin)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        scores = torch.matmul(q, k.transpose(2, 3)) / (self.head_dim**0.5)
        scores = scores.float() + mask[:, None]
        p = torch.softmax(scores, dim=-1).to(v.dtype)
        y = torch.matmul(p, v).transpose(1, 2).reshape(b, s, -1)
        return self.o_proj(y)


class ColaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        d, f, r, lr = config.hidden_size, config.intermediate_size, config.rank_mlp, set(config.lowrank)
        self.gate_proj = ColaLinear(d, f, r, "gate" in lr)
        self.up_proj = ColaLinear(d, f, r, "up" in lr)
        self.down_proj = ColaLinear(f, d, r, "down" in lr)

    def forward(self, x):
        g = self.gate_proj(x)
        if not self.gate_proj.lowrank:  # SwiGLU; a bottleneck gate is already nonlinear
            g = F.silu(g)
        return self.down_proj(g * self.up_proj(x))


class ColaDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.input_layernorm = ColaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = ColaAttention(config, layer_idx)
        self.post_attention_layernorm = ColaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = ColaMLP(config)

    def forward(self, x, cos, sin, mask, cache):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class ColaPreTrainedModel(PreTrainedModel):
    config_class = ColaConfig
    base_model_prefix = "model"
    _no_split_modules = ["ColaDecoderLayer"]
    _supports_cache_class = True

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, ColaLinear) and module.lowrank:  # boost's CoLA init
            (r, n_in), n_out = module.A.shape, module.B.shape[0]
            for p in (module.A, module.B):
                nn.init.normal_(p, std=r**-0.25 * (n_in + n_out) ** -0.25)
        elif isinstance(module, ColaLinear):
            nn.init.normal_(module.weight, std=std)
        elif isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=std)
        elif isinstance(module, ColaRMSNorm):
            nn.init.ones_(module.weight)


def attention_mask_bias(attention_mask, batch, q_len, past, device):
    """Additive [B, q_len, past + q_len] mask: causal, plus padding (0 in attention_mask)."""
    k_len = past + q_len
    qi = torch.arange(past, k_len, device=device)[:, None]
    kj = torch.arange(k_len, device=device)[None, :]
    allowed = (kj <= qi)[None].expand(batch, q_len, k_len)
    if attention_mask is not None:
        allowed = allowed & attention_mask[:, None, :k_len].bool()
    bias = torch.zeros(batch, q_len, k_len, device=device)
    return bias.masked_fill(~allowed, torch.finfo(torch.float32).min)


class ColaModel(ColaPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(ColaDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = ColaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                inputs_embeds=None, use_cache=None, output_hidden_states=None, return_dict=None, **kwargs):
        use_cache = self.config.use_cache if use_cache is None else use_cache
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        b, s, _ = x.shape
        legacy = isinstance(past_key_values, (tuple, list))
        cache = past_key_values
        if use_cache and DynamicCache is not None:
            if cache is None:
                cache = DynamicCache()
            elif legacy:
                cache = DynamicCache.from_legacy_cache(past_key_values)
        elif not isinstance(cache, Cache):
            cache = None
        past = cache.get_seq_length() if cache is not None else 0
        if position_ids is None:
            if attention_mask is not None:  # left padding: positions count real tokens only
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, past : past + s]
            else:
                position_ids = torch.arange(past, past + s, device=x.device)[None].expand(b, s)
        cos, sin = rope_tables(position_ids, self.config.hidden_size // self.config.num_attention_heads,
                               self.config.rope_theta, x.dtype)
        mask = attention_mask_bias(attention_mask, b, s, past, x.device)
        hidden = []
        for layer in self.layers:
            if output_hidden_states:
                hidden.append(x)
            x = layer(x, cos, sin, mask, cache)
        x = self.norm(x)
        if output_hidden_states:
            hidden.append(x)
        if cache is not None and legacy:
            cache = cache.to_legacy_cache()
        return BaseModelOutputWithPast(last_hidden_state=x, past_key_values=cache if use_cache else None,
                                       hidden_states=tuple(hidden) if output_hidden_states else None)


class ColaForCausalLM(ColaPreTrainedModel, GenerationMixin):
    _tied_weights_keys = ["lm_head.weight"]

    def __init__(self, config):
        super().__init__(config)
        self.model = ColaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                inputs_embeds=None, labels=None, use_cache=None, output_attentions=None,
                output_hidden_states=None, return_dict=None, **kwargs):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=past_key_values, inputs_embeds=inputs_embeds, use_cache=use_cache,
                         output_hidden_states=output_hidden_states)
        logits = self.lm_head(out.last_hidden_state).float()
        loss = None
        if labels is not None:  # next-token loss, mean over the positions (-100: ignored)
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                                   ignore_index=-100)
        return CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=out.past_key_values,
                                      hidden_states=out.hidden_states)

    def prepare_inputs_for_generation(self, input_ids, past_key_values=None, attention_mask=None,
                                      inputs_embeds=None, use_cache=True, **kwargs):
        past = 0
        if past_key_values is not None:
            if isinstance(past_key_values, (tuple, list)):
                past = past_key_values[0][0].shape[2] if len(past_key_values) else 0
            else:
                past = past_key_values.get_seq_length()
        if past > 0:
            input_ids = input_ids[:, past:]
        inputs = {"input_ids": input_ids}
        if inputs_embeds is not None and past == 0:
            inputs = {"inputs_embeds": inputs_embeds}
        inputs.update(past_key_values=past_key_values, attention_mask=attention_mask, use_cache=use_cache)
        return inputs

    def _reorder_cache(self, past_key_values, beam_idx):  # beam search with tuple caches
        return tuple(tuple(t.index_select(0, beam_idx.to(t.device)) for t in layer) for layer in past_key_values)
