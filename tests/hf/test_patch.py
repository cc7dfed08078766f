"""posenc.hf.patch: tiny random transformers models (hidden 64, 2 layers, 4 heads, vocab 100) take
their cos / sin from posenc. Unchanged config: the same logits (plain, packed position_ids, left
padding) and the same cached greedy generation; a scaled config or another encoding: the logits
of the model transformers builds with that config (same weights).

Tolerance 1e-5 on float32 logits: posenc's angles (float64 product, reduced) and transformers'
(float32 product) differ by at most ~p * w * 2^-24 rad, < 1e-6 at the positions used here.
"""

import pytest
import torch

from posenc.encodings import build
from posenc.encodings.rotary import RoPE
from posenc.hf import PosencRotaryEmbedding, patch

transformers = pytest.importorskip("transformers")

SMALL = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
             intermediate_size=128, vocab_size=100, max_position_embeddings=16, pad_token_id=0,
             bos_token_id=1, eos_token_id=2)  # fmt: skip
GEMMA_TYPES = ["sliding_attention", "full_attention"]
# model_type -> (Config class, CausalLM class, config keywords beyond SMALL)
ARCHS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM",
                    {"head_dim": 16, "layer_types": GEMMA_TYPES, "sliding_window": 4,
                     "query_pre_attn_scalar": 16}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM",
             {"partial_rotary_factor": 0.5, "original_max_position_embeddings": 8}),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM",
                 {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                      "partial_rotary_factor": 0.25}}),
}  # fmt: skip
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}
LINEAR = {"rope_type": "linear", "factor": 2.0}
LONGROPE = {"rope_type": "longrope", "short_factor": [1.0, 1.2, 1.5, 2.0],  # Phi-3: T > 8: long
            "long_factor": [1.5, 2.0, 4.0, 8.0]}  # fmt: skip
SCALINGS = {  # per model_type: two scaled configs transformers accepts for it
    "phi3": [LONGROPE, {"rope_type": "default", "rope_theta": 500.0}],  # Phi3Config: no yarn
    "gemma3_text": [{"full_attention": YARN}, {"sliding_attention": LINEAR}],
}


def build_model(arch, rope_parameters=None):
    """A tiny random model of `arch` (seed 0), with `rope_parameters` if given."""
    config_cls, model_cls, extra = ARCHS[arch]
    kwargs = {**SMALL, **extra}
    if rope_parameters is not None:
        kwargs["rope_parameters"] = rope_parameters
    config = getattr(transformers, config_cls)(**kwargs)
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(config).eval()


def rebuilt(model, scaling):
    """The same weights in the model transformers builds with `scaling` over its rope_parameters
    (rope_theta and partial_rotary_factor kept, as patch keeps them)."""
    own = model.config.rope_parameters

    def merged(old, new):
        return {**{k: old[k] for k in ("rope_theta", "partial_rotary_factor") if k in old}, **new}

    if model.config.model_type == "gemma3_text":
        params = {t: merged(own[t], scaling[t]) if t in scaling else own[t] for t in own}
    else:
        params = merged(own, scaling)
    ref = build_model(model.config.model_type, params)
    ref.load_state_dict(model.state_dict())
    return ref


def inputs():
    """(ids [2, 12], left-padded ids + attention mask, packed position_ids [2, 12])."""
    ids = torch.randint(3, 100, (2, 12), generator=torch.Generator().manual_seed(1))
    padded, mask = ids.clone(), torch.ones_like(ids)
    padded[0, :4], mask[0, :4] = 0, 0
    packed = torch.cat((torch.arange(5), torch.arange(7)))[None].expand(2, -1)
    return ids, padded, mask, packed


def all_logits(model):
    ids, padded, mask, packed = inputs()
    with torch.no_grad():
        return [model(ids).logits, model(padded, attention_mask=mask).logits,
                model(ids, position_ids=packed).logits]  # fmt: skip


def close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_unchanged_config_same_logits(arch):
    model = build_model(arch)
    want = all_logits(model)
    assert patch(model) is model
    assert isinstance(model.base_model.rotary_emb, PosencRotaryEmbedding)
    for got, ref in zip(all_logits(model), want):
        close(got, ref)


@pytest.mark.parametrize("case", [0, 1])
@pytest.mark.parametrize("arch", list(ARCHS))
def test_scaled_config_matches_transformers_rebuilt(arch, case):
    scaling = SCALINGS.get(arch, [YARN, LINEAR])[case]
    model = build_model(arch)
    want = all_logits(rebuilt(model, scaling))
    patch(model, scaling=scaling)
    for got, ref in zip(all_logits(model), want):
        close(got, ref)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_cached_greedy_generation_left_padded_equals_unpatched(arch):
    model = build_model(arch)
    _, padded, mask, _ = inputs()
    kwargs = dict(attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
    want = model.generate(padded, **kwargs)
    got = patch(model).generate(padded, **kwargs)
    assert torch.equal(got, want)


def test_dynamic_scaling_generation_matches_transformers():
    """dynamic NTK changes its base as the cache grows past max_position_embeddings (16)."""
    scaling = {"rope_type": "dynamic", "factor": 2.0}
    model = build_model("llama")
    ref = rebuilt(model, scaling)
    ids = inputs()[0]
    kwargs = dict(max_new_tokens=10, do_sample=False, pad_token_id=0, output_logits=True,
                  return_dict_in_generate=True)  # fmt: skip
    want = ref.generate(ids, **kwargs)
    got = patch(model, scaling=scaling).generate(ids, **kwargs)
    assert torch.equal(got.sequences, want.sequences)
    for a, b in zip(got.logits, want.logits):
        close(a, b)


def test_encoding_argument():
    model = build_model("llama")
    want = all_logits(rebuilt(model, {"rope_type": "default", "rope_theta": 500.0}))
    patch(model, RoPE(head_dim=16, base=500.0))
    for got, ref in zip(all_logits(model), want):
        close(got, ref)
    gemma = build_model("gemma3_text")
    want = all_logits(rebuilt(gemma, {"sliding_attention": {"rope_type": "default",
                                                            "rope_theta": 100.0}}))  # fmt: skip
    patch(gemma, {"sliding_attention": RoPE(base=100.0)})
    for got, ref in zip(all_logits(gemma), want):
        close(got, ref)


def test_nope_ignores_positions():
    model = patch(build_model("qwen3"), build("nope"))
    ids = inputs()[0]
    shuffled = torch.randperm(12, generator=torch.Generator().manual_seed(2))[None]
    with torch.no_grad():
        close(model(ids, position_ids=shuffled).logits, model(ids).logits)


def test_refusals():
    model = build_model("llama")
    with pytest.raises(ValueError, match="layout='interleaved'.*allowed layout 'half'"):
        patch(model, RoPE(head_dim=16, layout="interleaved"))
    with pytest.raises(ValueError, match="rotary_dim=8.*partial rotary: phi3, gpt_neox"):
        patch(model, RoPE(head_dim=16, rotary_dim=8))
    with pytest.raises(ValueError, match="allowed: posenc 'rope'"):
        patch(model, build("xpos", head_dim=16))
    with pytest.raises(ValueError, match="NoPETemperature cannot be applied"):
        patch(model, build("nope_temperature"))  # scales queries: not a cos, sin
    with pytest.raises(ValueError, match="head_dim=32, the model's is 16"):
        patch(model, RoPE(head_dim=32))
    with pytest.raises(ValueError, match="'rope_type'"):
        patch(model, scaling={"factor": 2.0})
    with pytest.raises(ValueError, match="not both"):
        patch(model, RoPE(), scaling=LINEAR)
    with pytest.raises(ValueError, match="keyed by layer type"):
        patch(model, {"full_attention": RoPE()})
    with pytest.raises(ValueError, match=r"\{layer_type: rope_parameters\}.*sliding_attention"):
        patch(build_model("gemma3_text"), scaling=YARN)
    with pytest.raises(TypeError, match="PreTrainedModel"):
        patch(torch.nn.Linear(2, 2))
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2))
    with pytest.raises(ValueError, match="'gpt2' is not supported: .* no rotary embedding module"):
        patch(gpt2)
