"""Shared fixtures: the published implementations posenc is matched against.

Reference libraries (transformers, rotary-embedding-torch, x-transformers, positional-encodings)
are test extras, imported lazily here (a test that needs one and lacks it is skipped), so
collecting the suite does not pay for importing them.
"""

import os

import pytest
import torch


def pytest_configure(config):
    """Under pytest-xdist (-n N), each of the N workers takes its share of the cores, and so do
    the processes its tests start (OMP_NUM_THREADS): N x all cores would oversubscribe them."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


@pytest.fixture(scope="session")
def hf_llama():
    """transformers' Llama modeling module (rotary embedding, apply_rotary_pos_emb, config)."""
    pytest.importorskip("transformers")
    from transformers.models.llama import modeling_llama

    return modeling_llama


@pytest.fixture(scope="session")
def hf_rope(hf_llama):
    """hf_rope(head_dim, base, max_pos, params) -> transformers' LlamaRotaryEmbedding."""

    def build(head_dim, base=10000.0, max_pos=4096, params=None):
        config = hf_llama.LlamaConfig(
            hidden_size=head_dim,
            num_attention_heads=1,
            head_dim=head_dim,
            max_position_embeddings=max_pos,
            rope_parameters={"rope_type": "default", **(params or {}), "rope_theta": base},
        )
        return hf_llama.LlamaRotaryEmbedding(config)

    return build


@pytest.fixture(scope="session")
def hf_cos_sin64():
    """hf_cos_sin64(rope, pos [B, T]) -> transformers' cos, sin [B, T, Dh] evaluated in float64
    from the module's own inv_freq and attention_scaling (its forward computes them in float32,
    whose angles are off by up to pos * 2^-24 rad: the float64 form is the exact target)."""

    def compute(rope, pos):
        freqs = pos.double()[..., None] * rope.inv_freq.double()  # [B, T, Dh/2]
        emb = torch.cat((freqs, freqs), dim=-1)  # transformers' half layout
        return emb.cos() * rope.attention_scaling, emb.sin() * rope.attention_scaling

    return compute


@pytest.fixture(scope="session")
def hf_apply(hf_llama):
    """hf_apply(q, k, cos, sin) -> transformers' apply_rotary_pos_emb (half layout)."""
    return hf_llama.apply_rotary_pos_emb


@pytest.fixture(scope="session")
def hf_rope_init(hf_llama):
    """hf_rope_init(dim, base, max_pos, params, seq_len) -> transformers' (inv_freq,
    attention_factor) for a Llama config with these rope parameters."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    def compute(dim, base, max_pos, params, seq_len=None):
        config = hf_llama.LlamaConfig(
            hidden_size=dim,
            num_attention_heads=1,
            head_dim=dim,
            max_position_embeddings=max_pos,
            rope_parameters={**params, "rope_theta": base},
        )
        rope_type = config.rope_parameters["rope_type"]
        if rope_type == "default":
            return hf_llama.LlamaRotaryEmbedding.compute_default_rope_parameters(config)
        return ROPE_INIT_FUNCTIONS[rope_type](config, seq_len=seq_len)

    return compute


@pytest.fixture(scope="session")
def tiny_lm_folder(tmp_path_factory):
    """A transformers model folder: a tiny random Llama (context 128) and its tokenizer."""
    pytest.importorskip("transformers")
    from support.tiny_lm import tiny_llama_folder

    return tiny_llama_folder(tmp_path_factory.mktemp("tiny_lm"))
