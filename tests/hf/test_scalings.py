"""Every rope_type and rope_parameters key that transformers reads, against posenc: the types of
ROPE_INIT_FUNCTIONS and the keys any model's code reads are posenc's, and from_config of random
configs with every key gives transformers' inverse frequencies and attention factor; the
model-specific formulas (Phi-3.5-MoE's short / long mscale, Hunyuan's NTK alpha) likewise."""

import glob
import os
import random
import re

import pytest
import torch

from posenc.functional.rope_scaling import KNOWN_KEYS, ROPE_SCALING
from posenc.hf import from_config
from posenc.hf.config import MROPE_KEYS, RENAMED_TYPES
from posenc.hf.patch import cos_sin

tf = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS, RopeParameters  # noqa: E402

# keys a model reads from rope_parameters that posenc's from_config does not turn into the rope:
# each with where it acts instead
OUTSIDE_THE_ROPE = {
    "llama_4_scaling_beta": "Ministral 3 / Mistral 4 scale queries by 1 + beta * log(1 + "
    "floor(p / L0)) in their attention, after the rotation: patch leaves it there",
}
MODEL_KEYS = {"alpha"}  # Hunyuan's NTK alpha: from_config makes it posenc's "ntk"


def keys_read_by_models() -> dict[str, set[str]]:
    """{key: model types} of every rope_parameters key a modeling file reads."""
    root = os.path.join(os.path.dirname(tf.__file__), "models")
    pattern = re.compile(r"rope_parameters(?:\[[^\]]*\])?(?:\.get\(|\[)\s*\"([a-z_0-9]+)\"")
    found = {}
    for path in glob.glob(os.path.join(root, "*", "modeling_*.py")):
        with open(path) as f:
            for key in pattern.findall(f.read()):
                found.setdefault(key, set()).add(os.path.basename(os.path.dirname(path)))
    return found


def test_every_rope_type_of_transformers_is_posencs():
    for rope_type in ["default", *ROPE_INIT_FUNCTIONS]:
        assert RENAMED_TYPES.get(rope_type, rope_type) in ROPE_SCALING, rope_type


def test_every_rope_key_transformers_reads_is_read_by_posenc():
    """RopeParameters' keys and every key a model's code reads from rope_parameters: posenc
    reads it, or it acts outside the rotary cos / sin (named with where)."""
    read = KNOWN_KEYS | set(MROPE_KEYS) | MODEL_KEYS
    declared = set(RopeParameters.__annotations__)
    assert declared <= read, sorted(declared - read)
    by_models = keys_read_by_models()
    assert "mscale_all_dim" in by_models and "short_mscale" in by_models  # the scan sees them
    missing = {k: sorted(v) for k, v in by_models.items() if k not in read | set(OUTSIDE_THE_ROPE)}
    assert not missing, missing


# --------------------------------------------------------------------------- random configs


def random_params(rope_type: str, rng, half: int, original: int) -> dict:
    """rope_parameters of `rope_type` with each optional key present or not, random values."""
    params = {"rope_type": rope_type, "rope_theta": 10 ** rng.uniform(3.5, 6.5)}
    maybe = lambda key, value: params.update({key: value}) if rng.random() < 0.6 else None  # noqa: E731
    if rope_type != "default":
        params["factor"] = rng.choice([1.0, 2.0, 4.0, 8.0, 16.0, 40.0])
    if rope_type in ("yarn", "llama3", "longrope"):
        params["original_max_position_embeddings"] = original
    if rope_type == "yarn":
        beta_slow = rng.choice([0.5, 1.0, 2.0])
        maybe("beta_slow", beta_slow)
        maybe("beta_fast", beta_slow + rng.choice([8.0, 31.0]))
        maybe("mscale", rng.choice([0.707, 1.0, 1.3]))
        maybe("mscale_all_dim", rng.choice([0.707, 1.0, 1.3]))
        maybe("attention_factor", rng.choice([0.8, 1.2]))
        maybe("truncate", rng.choice([True, False]))
    if rope_type == "llama3":
        params["low_freq_factor"] = low = rng.choice([1.0, 2.0])
        params["high_freq_factor"] = low + rng.choice([0.0, 2.0, 3.0])
    if rope_type != "default":  # (Llama's default rope ignores it)
        maybe("partial_rotary_factor", rng.choice([0.25, 0.5, 0.75, 1.0]))
    if rope_type == "longrope":
        half = int(2 * half * params.get("partial_rotary_factor", 1.0)) // 2  # R / 2 pairs
        params["short_factor"] = [rng.uniform(1.0, 2.0) for _ in range(half)]
        params["long_factor"] = [rng.uniform(1.0, 30.0) for _ in range(half)]
        maybe("attention_factor", rng.choice([0.9, 1.1]))
        if rng.random() < 0.5:
            del params["factor"]  # then from max_position_embeddings / original
    return params


@pytest.mark.parametrize("rope_type", ["default", *ROPE_INIT_FUNCTIONS])
def test_from_config_matches_transformers_for_every_key(rope_type):
    """Random Llama configs of each rope_type with random subsets of its keys; sequence lengths
    below, at and past the original length: from_config's inv_freq and attention factor are
    transformers' (ROPE_INIT_FUNCTIONS, or the default)."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    rng = random.Random(rope_type)
    for trial in range(12):
        head_dim = rng.choice([16, 32, 64, 128])
        original = rng.choice([256, 2048, 4096])
        params = random_params(rope_type, rng, head_dim // 2, original)
        config = tf.LlamaConfig(hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim,
                                num_hidden_layers=1, intermediate_size=8, vocab_size=8,
                                max_position_embeddings=original * rng.choice([1, 4]),
                                rope_parameters=params)  # fmt: skip
        enc = from_config(config)
        for seq_len in (None, 8, original, original + 1, 5 * original):
            if rope_type == "default":
                inv, factor = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
            else:
                inv, factor = ROPE_INIT_FUNCTIONS[rope_type](config, seq_len=seq_len)
            pos = torch.tensor([0 if seq_len is None else seq_len - 1])
            ours, our_factor = enc.frequencies(pos, head_dim)
            where = (rope_type, trial, seq_len, params)
            assert ours.shape == inv.shape, where
            torch.testing.assert_close(ours, inv.float(), rtol=2e-6, atol=0, msg=str(where))
            assert our_factor == pytest.approx(factor, rel=1e-6), where


# -------------------------------------------------------------------- model-specific formulas


def test_phimoe_short_and_long_mscale():
    """Phi-3.5-MoE (transformers' Phimoe): longrope whose cos / sin carry short_mscale up to the
    original length and long_mscale past it; posenc's equal transformers' up to the original
    length, and past it carry long_mscale on the long factors (transformers 5's Phimoe keeps
    the short factors there: its forward recomputes inv_freq without the length)."""
    from transformers.models.phimoe.modeling_phimoe import PhimoeRotaryEmbedding

    rng = random.Random(0)
    for _ in range(4):
        head_dim, original = rng.choice([16, 32]), rng.choice([64, 4096])
        params = {"rope_type": "longrope", "rope_theta": 1e4,
                  "short_factor": [rng.uniform(1, 2) for _ in range(head_dim // 2)],
                  "long_factor": [rng.uniform(1, 30) for _ in range(head_dim // 2)],
                  "short_mscale": rng.uniform(0.8, 1.5), "long_mscale": rng.uniform(0.8, 1.5),
                  "original_max_position_embeddings": original}  # fmt: skip
        config = tf.PhimoeConfig(hidden_size=2 * head_dim, num_attention_heads=2,
                                 head_dim=head_dim, num_hidden_layers=1, vocab_size=8,
                                 max_position_embeddings=32 * original,
                                 rope_parameters=params)  # fmt: skip
        module, enc = PhimoeRotaryEmbedding(config), from_config(config)
        for pos in (torch.arange(8)[None], torch.arange(original - 8, original)[None]):
            cos, sin = module(torch.zeros(1, pos.shape[-1], 8), pos)
            ours = cos_sin(enc, pos, head_dim)
            atol = 2 * (1e-5 + 4 * pos.max().item() * 2.0**-24)  # transformers' float32 angles
            torch.testing.assert_close(ours[0], cos, rtol=0, atol=atol)
            torch.testing.assert_close(ours[1], sin, rtol=0, atol=atol)
        past = torch.arange(original, original + 8)[None]
        cos, sin = module(torch.zeros(1, 8, 8), past)
        ours = cos_sin(enc, past, head_dim)
        amplitude = lambda c, s: (c**2 + s**2).sqrt()  # noqa: E731
        want = torch.full_like(cos, params["long_mscale"])
        torch.testing.assert_close(amplitude(*ours), want, rtol=1e-5, atol=0)
        torch.testing.assert_close(amplitude(cos, sin), want, rtol=1e-5, atol=0)
        inv, factor = enc.frequencies(past)
        base = 1.0 / 1e4 ** (torch.arange(0, head_dim, 2) / head_dim)
        torch.testing.assert_close(inv, base / torch.tensor(params["long_factor"]), rtol=1e-5,
                                   atol=0)  # fmt: skip
        assert factor == pytest.approx(params["long_mscale"])


def test_hunyuan_ntk_alpha():
    """Hunyuan: rope_type "dynamic" with `alpha` is NTK with a fixed base change alpha^(d/(d-2))."""
    from transformers.models.hunyuan_v1_dense.modeling_hunyuan_v1_dense import (
        HunYuanDenseV1RotaryEmbedding,
    )

    for alpha in (1.0, 1000.0, 37.5):
        params = {"rope_type": "dynamic", "alpha": alpha, "factor": 1.0, "rope_theta": 1e4}
        config = tf.HunYuanDenseV1Config(hidden_size=64, num_attention_heads=2, head_dim=32,
                                         num_hidden_layers=1, vocab_size=8,
                                         rope_parameters=params)  # fmt: skip
        module, enc = HunYuanDenseV1RotaryEmbedding(config), from_config(config)
        for pos in (torch.tensor([0]), torch.tensor([10**5])):
            inv, factor = enc.frequencies(pos, 32)
            torch.testing.assert_close(inv, module.inv_freq, rtol=2e-6, atol=0)
            assert factor == module.attention_scaling
