# CoLA (low-rank bottleneck) language model configuration for transformers,
# written by boost-export into the folders it makes (load with
# trust_remote_code=True). The model is boost's, exactly as its
# docs/MODEL.md describes it; this file is tools/hf/configuration_cola.py in
# the boost repository.
from transformers import PretrainedConfig

PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")


class ColaConfig(PretrainedConfig):
    model_type = "cola"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(
        self,
        vocab_size=320,
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=4,
        num_attention_heads=4,
        rank_attn=16,
        rank_mlp=16,
        lowrank=PROJECTIONS,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        initializer_range=0.02,
        tie_word_embeddings=False,
        use_cache=True,
        **kwargs,
    ):
        unknown = [p for p in lowrank if p not in PROJECTIONS]
        if unknown:
            raise ValueError(f"lowrank: unknown projections {unknown} (known: {PROJECTIONS})")
        if hidden_size % num_attention_heads or (hidden_size // num_attention_heads) % 2:
            raise ValueError("hidden_size must split into heads of an even dimension")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_attention_heads
        self.rank_attn = rank_attn
        self.rank_mlp = rank_mlp
        self.lowrank = list(lowrank)
        self.max_position_embeddings = max_position_embeddings
        self.rms_norm_eps = rms_norm_eps
        self.rope_theta = rope_theta
        self.initializer_range = initializer_range
        self.use_cache = use_cache
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
