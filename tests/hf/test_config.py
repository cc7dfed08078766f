"""posenc.hf.from_config / to_rope_parameters: configs written like the hub's config.json files
(tiny sizes), their encodings against transformers' own rotary embeddings, the v5 round trip,
layer selection (Gemma 3, Llama 4) and bad configs."""

import importlib
import subprocess
import sys

import pytest
import torch

import posenc
from posenc.encodings import ENCODINGS
from posenc.encodings.rotary import RoPE
from posenc.functional.rope_scaling import ROPE_SCALING
from posenc.hf import from_config, to_config, to_rope_parameters

SMALL = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
             intermediate_size=128, vocab_size=100)  # fmt: skip
LONGROPE = dict(short_factor=[1.0, 1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.0],
                long_factor=[1.1, 1.4, 2.0, 3.5, 6.0, 9.0, 12.0, 16.0])  # fmt: skip

# name -> (config.json dict, transformers module, Config class, RotaryEmbedding class)
CASES = {
    "llama3.1": ({"model_type": "llama", **SMALL, "max_position_embeddings": 131072,
                  "rope_theta": 500000.0,
                  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 8192,
                                   "rope_type": "llama3"}},
                 "llama", "LlamaConfig", "LlamaRotaryEmbedding"),
    "qwen2.5": ({"model_type": "qwen2", **SMALL, "max_position_embeddings": 32768,
                 "rope_theta": 1000000.0,
                 "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768,
                                  "type": "yarn"}},
                "qwen2", "Qwen2Config", "Qwen2RotaryEmbedding"),
    "phi3-mini-128k": ({"model_type": "phi3", **SMALL, "max_position_embeddings": 131072,
                        "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                        "rope_scaling": {"type": "longrope", **LONGROPE}},
                       "phi3", "Phi3Config", "Phi3RotaryEmbedding"),
    "phi4-mini": ({"model_type": "phi3", **SMALL, "max_position_embeddings": 131072,
                   "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                   "partial_rotary_factor": 0.75,
                   "rope_scaling": {"type": "longrope",
                                    **{k: v[:6] for k, v in LONGROPE.items()}}},
                  "phi3", "Phi3Config", "Phi3RotaryEmbedding"),
    "gemma3": ({"model_type": "gemma3_text", **SMALL, "head_dim": 16,
                "layer_types": ["sliding_attention", "full_attention"],
                "max_position_embeddings": 131072, "rope_local_base_freq": 10000.0,
                "rope_theta": 1000000.0, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}},
               "gemma3", "Gemma3TextConfig", "Gemma3RotaryEmbedding"),
    "llama4": ({"model_type": "llama4_text", **SMALL, "num_hidden_layers": 4, "head_dim": 16,
                "intermediate_size_mlp": 128, "no_rope_layers": [1, 1, 1, 0],
                "attn_temperature_tuning": True, "floor_scale": 8192, "attn_scale": 0.1,
                "max_position_embeddings": 10485760, "rope_theta": 500000.0,
                "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                 "original_max_position_embeddings": 8192,
                                 "rope_type": "llama3"}},
               "llama4", "Llama4TextConfig", "Llama4TextRotaryEmbedding"),
    "deepseek-v3": ({"model_type": "deepseek_v3", **SMALL, "qk_rope_head_dim": 16,
                     "qk_nope_head_dim": 32, "v_head_dim": 32, "kv_lora_rank": 16,
                     "q_lora_rank": 32, "max_position_embeddings": 163840, "rope_theta": 10000,
                     "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                                      "mscale_all_dim": 1.0,
                                      "original_max_position_embeddings": 4096, "type": "yarn"}},
                    "deepseek_v3", "DeepseekV3Config", "DeepseekV3RotaryEmbedding"),
    "pythia": ({"model_type": "gpt_neox", **SMALL, "max_position_embeddings": 2048,
                "rotary_pct": 0.25, "rotary_emb_base": 10000},
               "gpt_neox", "GPTNeoXConfig", "GPTNeoXRotaryEmbedding"),
    "p-rope": ({"model_type": "llama", **SMALL,  # Gemma 4's proportional RoPE, on Llama
                "rope_parameters": {"rope_type": "proportional", "rope_theta": 10000.0,
                                    "partial_rotary_factor": 0.25}},
               "llama", "LlamaConfig", "LlamaRotaryEmbedding"),
}  # fmt: skip
LAYOUTS = {"llama4": "interleaved", "deepseek-v3": "interleaved"}
QWEN2_VL = {"model_type": "qwen2_vl", "hidden_size": 256, "num_attention_heads": 2,
            "num_hidden_layers": 2, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}  # fmt: skip


def hf(name):
    """(transformers config object, its model's rotary embedding) for CASES[name]."""
    raw, module, config_cls, rotary_cls = CASES[name]
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    config = getattr(modeling, config_cls)(**raw)
    return config, getattr(modeling, rotary_cls)(config)


def rope_layers(name):
    """The layer types with rope of CASES[name] (None: one rope for every layer)."""
    return ["sliding_attention", "full_attention"] if name == "gemma3" else [None]


@pytest.mark.parametrize("name", list(CASES))
def test_inv_freq_and_attention_factor_match_transformers(name):
    pytest.importorskip("transformers")
    raw = CASES[name][0]
    if raw.get("rope_parameters", {}).get("rope_type", "default") not in ROPE_SCALING:
        pytest.skip(f"posenc has no rope_type {raw['rope_parameters']['rope_type']!r}")
    config, rotary = hf(name)
    for layer_type in rope_layers(name):
        prefix = f"{layer_type}_" if layer_type else ""
        want_freq = getattr(rotary, f"{prefix}inv_freq")
        want_factor = getattr(rotary, f"{prefix}attention_scaling")
        for source in (raw, config):  # the config.json dict and transformers' v5 config
            enc = from_config(source, layer_type)
            assert isinstance(enc, RoPE) and enc.layout == LAYOUTS.get(name, "half")
            inv_freq, factor = enc.frequencies(torch.arange(8))
            torch.testing.assert_close(inv_freq, want_freq, rtol=1e-5, atol=0)
            assert factor == pytest.approx(want_factor, rel=1e-6)
        rope_parameters = config.to_dict()["rope_parameters"]
        if layer_type:
            rope_parameters = rope_parameters[layer_type]
        assert to_rope_parameters(from_config(config, layer_type)) == rope_parameters


@pytest.mark.parametrize("name", ["phi3-mini-128k", "phi4-mini"])
def test_longrope_long_factors_past_the_original_length(name):
    """Past original_max_position_embeddings (top level, as Phi-3 has it) the long factors."""
    transformers = pytest.importorskip("transformers")
    config, _ = hf(name)
    longrope = transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS["longrope"]
    want, want_factor = longrope(config, seq_len=5000)
    inv_freq, factor = from_config(CASES[name][0]).frequencies(torch.tensor([4999]))
    torch.testing.assert_close(inv_freq, want, rtol=1e-5, atol=0)
    assert factor == pytest.approx(want_factor) and factor > 1


def test_gemma3_layer_types():
    raw = CASES["gemma3"][0]
    with pytest.raises(ValueError, match="layer_type= one of.*sliding_attention.*full_attention"):
        from_config(raw)
    with pytest.raises(ValueError, match="'global'"):
        from_config(raw, "global")
    local, full = from_config(raw, layer=0), from_config(raw, layer=1)
    assert local.base == 10000.0 and local.rope_type == "default"
    assert full.base == 1e6 and full.rope_type == "linear" and full.scaling["factor"] == 8.0
    assert to_rope_parameters(full) == {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}


def test_llama4_nope_layers_and_temperature():
    raw = CASES["llama4"][0]
    temperature = {"attn_temperature_tuning": True, "floor_scale": 8192, "attn_scale": 0.1}
    rope, nope = from_config(raw, layer=0), from_config(raw, layer=3)
    assert isinstance(rope, RoPE) and type(nope) is posenc.ENCODINGS["nope_temperature"]
    assert (nope.floor_scale, nope.attn_scale) == (8192, 0.1)  # the NoPE layers' temperature
    assert from_config(raw, "nope").family == "none" and isinstance(from_config(raw), RoPE)
    untuned = from_config({**raw, "attn_temperature_tuning": False}, layer=3)
    assert type(untuned) is posenc.ENCODINGS["nope"]
    assert nope.hf_extras == temperature  # kept for to_config
    assert to_config(nope) == temperature
    assert to_config(rope) == {"rope_parameters": rope.hf_rope_parameters, **temperature}
    with pytest.raises(ValueError, match="not per layer type; allowed: None or 'nope'"):
        from_config(raw, "full_attention")
    with pytest.raises(ValueError, match=r"layer must be in 0..3"):
        from_config(raw, layer=4)
    # no list: one NoPE layer every no_rope_layer_interval, as transformers builds it
    every2 = {**raw, "no_rope_layers": [], "no_rope_layer_interval": 2}
    assert [from_config(every2, layer=i).family for i in range(4)] == ["rotary", "none"] * 2


def test_qwen2_vl_mrope():
    transformers = pytest.importorskip("transformers")
    config = transformers.Qwen2VLTextConfig(**QWEN2_VL)
    enc = from_config(config)
    assert enc is not None and type(enc) is ENCODINGS["mrope"]
    assert to_rope_parameters(enc) == config.to_dict()["rope_parameters"]
    # text tokens (time = row = col = t) turn like 1-D RoPE with transformers' frequencies
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding

    t = torch.arange(6)
    angles = enc.angles(t[:, None].expand(6, 3))
    want = t[:, None].double() * Qwen2VLRotaryEmbedding(config).inv_freq.double()
    torch.testing.assert_close(angles.double(), want, rtol=1e-6, atol=1e-6)


def test_hand_built_rope_round_trips():
    params = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    rope = RoPE(head_dim=16, rotary_dim=8, base=5e5, scaling=params)
    written = to_rope_parameters(rope)
    assert written == {**params, "rope_theta": 5e5, "partial_rotary_factor": 0.5}
    again = from_config({"head_dim": 16, "rope_parameters": written})
    assert again.rotary_dim() == 8 and again.attention_factor == rope.attention_factor
    torch.testing.assert_close(again.inv_freq, rope.inv_freq, rtol=0, atol=0)
    with pytest.raises(ValueError, match="no transformers rope_parameters"):
        to_rope_parameters(from_config(CASES["llama4"][0], "nope"))
    with pytest.raises(ValueError, match="'ntk'"):
        to_rope_parameters(RoPE(head_dim=16, scaling={"rope_type": "ntk", "factor": 2.0}))


def rope_config(**params):
    return {**SMALL, "rope_parameters": {"rope_theta": 10000.0, **params}}


@pytest.mark.parametrize(
    "config, match",
    [
        (rope_config(rope_type="foo"), "'rope_type': unknown rope_type 'foo'"),
        (rope_config(rope_type="default", bogus=1), "key 'bogus' cannot be represented"),
        (rope_config(rope_type="linear"), "'factor'"),
        (rope_config(rope_type="linear", factor=-2.0), "factor must be"),
        (rope_config(rope_type="default", rope_theta=0.5), "rope_theta must be"),
        (
            rope_config(
                rope_type="longrope",
                **{**LONGROPE, "short_factor": [1.0]},
                original_max_position_embeddings=64,
            ),
            "short_factor",
        ),
        ({**SMALL}, "no rotary encoding"),
        ({"rope_theta": 1e4}, "head_dim"),
    ],
)
def test_bad_configs_name_the_key(config, match):
    with pytest.raises(ValueError, match=match):
        from_config(config)


def test_bad_arguments():
    with pytest.raises(TypeError, match="PretrainedConfig or the dict"):
        from_config("llama")
    with pytest.raises(ValueError, match="not per layer type; allowed: None"):
        from_config(CASES["llama3.1"][0], "sliding_attention")
    with pytest.raises(ValueError, match="not both"):
        from_config(CASES["gemma3"][0], "full_attention", layer=1)
    raw = CASES["qwen2.5"][0]
    before = repr(raw)
    from_config(raw)
    assert repr(raw) == before  # the caller's dict is left as it was


def test_from_config_needs_no_transformers():
    """posenc.hf imports and from_config runs with transformers blocked; patch says what to
    install."""
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "import posenc.hf as H\n"
        "assert H.from_config({'head_dim': 8, 'rope_theta': 1e4}).base == 1e4\n"
        "try:\n    H.patch(object())\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install posenc[hf]" in out.stdout
