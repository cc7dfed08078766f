"""Every export round-trips through transformers' own rotary embedding (issue 27's class): a
hand-built posenc rope of every rope_type transformers has, with and without a partial rotary
dim (also given as rotary_dim AND a conflicting partial_rotary_factor), written by to_config and
read by transformers' GPTNeoXRotaryEmbedding, gives posenc's cos / sin. Bad config types are one
TypeError naming the key. Hunyuan's NTK with `alpha` matches transformers' own module.
"""

import pytest
import torch

from posenc.encodings.rotary import RoPE
from posenc.hf import from_config, to_config, to_rope_parameters
from posenc.hf.patch import cos_sin

transformers = pytest.importorskip("transformers")

HEAD = 16
SCALINGS = {
    "default": {},
    "linear": {"factor": 2.0},
    "dynamic": {"factor": 2.0, "original_max_position_embeddings": 48},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 48, "beta_fast": 16.0},
    "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 48},
    "longrope": {"factor": 4.0, "original_max_position_embeddings": 48},  # factors: per R
}  # fmt: skip
PARTIAL = {  # how the rotary dim is given -> (RoPE keywords, the R it rotates)
    "full": ({}, HEAD),
    "rotary_dim": ({"rotary_dim": 8}, 8),
    "rotary_dim, conflicting factor": ({"rotary_dim": 8, "prf": 0.25}, 8),
}


def transformers_cos_sin(config: dict, positions: torch.Tensor):
    """cos, sin of transformers' GPTNeoXRotaryEmbedding (it honours partial_rotary_factor for
    every rope_type) built from the exported keys, fresh."""
    from transformers.models.gpt_neox import modeling_gpt_neox as m

    keys = dict(hidden_size=HEAD * 2, num_attention_heads=2,
                max_position_embeddings=config.pop("max_position_embeddings", 64))  # fmt: skip
    cfg = m.GPTNeoXConfig(**keys, **config)
    return m.GPTNeoXRotaryEmbedding(cfg)(torch.zeros(1, 1, HEAD * 2), positions)


@pytest.mark.parametrize("partial", list(PARTIAL))
@pytest.mark.parametrize("rope_type", list(SCALINGS))
def test_export_round_trips_through_transformers(rope_type, partial):
    keywords, rotary = PARTIAL[partial]
    scaling = {"rope_type": rope_type, **SCALINGS[rope_type]}
    if rope_type == "longrope":  # one factor per rotary pair
        pairs = range(rotary // 2)
        scaling.update(short_factor=[1.0 + 0.2 * i for i in pairs],
                       long_factor=[1.5 + i for i in pairs])  # fmt: skip
    if "prf" in keywords:
        scaling["partial_rotary_factor"] = keywords.pop("prf")
        keywords = {**keywords}
    rope = RoPE(head_dim=HEAD, scaling=scaling, **keywords)
    assert rope.rotary_dim() == rotary
    config = to_config(rope)
    if rope_type == "dynamic":
        assert config["max_position_embeddings"] == 48
        assert "original_max_position_embeddings" not in config["rope_parameters"]
    for positions in (torch.arange(12)[None], torch.arange(90, 102)[None]):  # across 48 / 64
        want = transformers_cos_sin(dict(config), positions)
        got = cos_sin(rope, positions, HEAD)
        for a, b in zip(got, want):
            assert a.shape == b.shape
            torch.testing.assert_close(a, b, rtol=0, atol=2e-5)


def test_dynamic_with_original_length_refuses_a_bare_rope_parameters():
    rope = RoPE(head_dim=HEAD, scaling={"rope_type": "dynamic", "factor": 2.0,
                                        "original_max_position_embeddings": 48})  # fmt: skip
    with pytest.raises(ValueError, match="use to_config"):
        to_rope_parameters(rope)


@pytest.mark.parametrize(
    "config, key",
    [
        ({"rope_parameters": [10000.0]}, "'rope_parameters' must be a dict.*list"),
        ({"rope_parameters": "yarn"}, "'rope_parameters' must be a dict.*str"),
        ({"rope_scaling": ["linear", 2.0], "rope_theta": 1e4}, "'rope_scaling' must be a dict"),
        ({"rope_parameters": {"full_attention": {"rope_theta": 1e4}, "sliding_attention": [1]}},
         "its key 'sliding_attention' holds a list"),
    ],
)  # fmt: skip
def test_rope_parameters_of_the_wrong_type_is_one_type_error(config, key):
    with pytest.raises(TypeError, match=key) as info:
        from_config({"hidden_size": 64, "num_attention_heads": 4, **config})
    assert "\n" not in str(info.value)


def test_hunyuan_ntk_alpha_matches_transformers():
    """Hunyuan's checkpoints say rope_type "dynamic" with a fixed `alpha`: static NTK."""
    from transformers.models.hunyuan_v1_dense import modeling_hunyuan_v1_dense as m

    params = {"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": 10000.0}
    config = m.HunYuanDenseV1Config(hidden_size=64, num_attention_heads=4, head_dim=HEAD,
                                    max_position_embeddings=64, rope_parameters=params)  # fmt: skip
    theirs = m.HunYuanDenseV1RotaryEmbedding(config)
    ours = from_config(config)
    assert ours.rope_type == "ntk"
    for positions in (torch.arange(8)[None], torch.arange(4000, 4008)[None]):
        want = theirs(torch.zeros(1, 1, 64), positions)
        for a, b in zip(cos_sin(ours, positions, HEAD), want):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-4)
