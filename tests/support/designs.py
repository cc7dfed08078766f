"""Tiny random configs of each RoPE design `posenc stretch` must take (context 128)."""


def configs():
    import transformers as T

    common = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128)  # fmt: skip
    return {
        # RoPE per layer type: local (10k) on sliding layers, global (1M) on full ones
        "gemma3": lambda v: T.Gemma3TextConfig(
            vocab_size=v,
            num_hidden_layers=4,
            head_dim=16,
            sliding_window=32,
            layer_types=["sliding_attention", "full_attention"] * 2,
            rope_theta=1e6,
            rope_local_base_freq=1e4,
            query_pre_attn_scalar=16,
            **common,
        ),  # fmt: skip
        # one rope, alternating sliding / full layers, attention and logit soft-capping
        "gemma2": lambda v: T.Gemma2Config(
            vocab_size=v,
            num_hidden_layers=2,
            head_dim=16,
            sliding_window=32,
            query_pre_attn_scalar=16,
            **common,
        ),  # fmt: skip
        # every layer a sliding window shorter than the context
        "sliding": lambda v: T.MistralConfig(
            vocab_size=v, num_hidden_layers=2, sliding_window=48, **common
        ),  # fmt: skip
        # a quarter of each head rotates
        "partial": lambda v: T.StableLmConfig(
            vocab_size=v, num_hidden_layers=2, partial_rotary_factor=0.25, **common
        ),  # fmt: skip
        # 2^17 logits per position (the tokenizer uses the first ~600)
        "large_vocab": lambda v: T.LlamaConfig(
            vocab_size=131072, num_hidden_layers=1, **common
        ),  # fmt: skip
    }
