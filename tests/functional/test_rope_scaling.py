"""posenc.rope_scaling / rope_inv_freq: every rope_type against transformers' rope init
functions."""

import random

import pytest
import torch

import posenc
from posenc.functional import rope_cos_sin, rope_inv_freq
from posenc.functional.rope_scaling import ROPE_SCALING

CASES = 12  # random parameter sets per rope_type
ORIGINAL_LENGTHS = [512, 2048, 4096, 8192]


def random_case(rng):
    dim = rng.randrange(32, 257, 2)
    base = 10 ** rng.uniform(4, 6)
    factor = rng.choice([rng.uniform(2, 32), float(rng.choice([2, 4, 8, 16, 32]))])
    original = rng.choice(ORIGINAL_LENGTHS)
    return dim, base, factor, original


def seq_lens(rng, original):
    return [
        None,
        rng.randrange(1, original),
        original,
        original + 1,
        rng.randrange(original, 40 * original),
    ]


def assert_same(ours, theirs):
    inv, af = ours
    inv_ref, af_ref = theirs
    assert inv.dtype == torch.float32 and inv.shape == inv_ref.shape
    assert (inv - inv_ref).abs().max().item() <= 1e-5
    # relative too: the low frequencies are tiny, an absolute bound alone would not see them
    torch.testing.assert_close(inv, inv_ref.float(), rtol=2e-6, atol=0)
    assert af == pytest.approx(float(af_ref), rel=1e-12)


@pytest.mark.parametrize("rope_type", ["default", "linear"])
def test_default_and_linear_match_transformers(rope_type, hf_rope_init):
    rng = random.Random(rope_type)
    for _ in range(CASES):
        dim, base, factor, original = random_case(rng)
        params = {"rope_type": rope_type} | ({"factor": factor} if rope_type == "linear" else {})
        assert_same(rope_inv_freq(dim, base, params), hf_rope_init(dim, base, original, params))


def test_dynamic_matches_transformers_at_every_seq_len(hf_rope_init):
    rng = random.Random(1)
    for _ in range(CASES):
        dim, base, factor, original = random_case(rng)
        params = {"rope_type": "dynamic", "factor": factor}
        for seq_len in seq_lens(rng, original):
            ours = rope_inv_freq(
                dim, base, {**params, "original_max_position_embeddings": original}, seq_len
            )
            assert_same(ours, hf_rope_init(dim, base, original, params, seq_len))
        # the legacy key `type` and max_position_embeddings as the original length
        legacy = {"type": "dynamic", "factor": factor, "max_position_embeddings": original}
        assert_same(
            rope_inv_freq(dim, base, legacy, 3 * original),
            hf_rope_init(dim, base, original, params, 3 * original),
        )


def test_yarn_matches_transformers(hf_rope_init):
    rng = random.Random(2)
    for i in range(4 * CASES):
        dim, base, factor, original = random_case(rng)
        params = {
            "rope_type": "yarn",
            "factor": factor,
            "original_max_position_embeddings": original,
        }
        options = {
            "beta_fast": rng.choice([None, 32, 16, 64, rng.uniform(8, 64)]),
            "beta_slow": rng.choice([None, 1, 2, rng.uniform(0.5, 4)]),
            "truncate": rng.choice([True, False]),
            "attention_factor": rng.choice([None, rng.uniform(0.5, 2)]),
        }
        mscale = [
            (None, None),
            (1.0, 1.0),
            (rng.uniform(0.5, 1.5), rng.uniform(0.5, 1.5)),
            (0.7, None),
        ]
        options["mscale"], options["mscale_all_dim"] = mscale[i % 4]
        params |= {k: v for k, v in options.items() if v is not None or rng.random() < 0.3}
        if i % 6 == 5:  # DeepSeek style: no factor, max / original instead
            params["factor"] = None
        max_pos = int(original * factor)
        ours = rope_inv_freq(dim, base, {**params, "max_position_embeddings": max_pos})
        assert_same(ours, hf_rope_init(dim, base, max_pos, params))


def test_yarn_truncate_changes_the_ramp():
    params = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096}
    a, _ = rope_inv_freq(128, 10000.0, params)
    b, _ = rope_inv_freq(128, 10000.0, {**params, "truncate": False})
    assert not torch.allclose(a, b)


def test_llama3_matches_transformers(hf_rope_init):
    rng = random.Random(3)
    for i in range(2 * CASES):
        dim, base, factor, original = random_case(rng)
        low = rng.choice([1.0, rng.uniform(0.5, 2)])
        params = {
            "rope_type": "llama3",
            "factor": factor,
            "low_freq_factor": low,
            "high_freq_factor": low + rng.choice([3.0, rng.uniform(0.5, 6)]),
            "original_max_position_embeddings": original,
        }
        if i == 0:  # Llama 3.1 itself
            dim, base = 128, 500000.0
            params |= {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
            params["original_max_position_embeddings"] = 8192
        if i == 1:  # Llama 4 Scout: equal factors, no band to smooth over
            dim, base = 128, 500000.0
            params |= {"factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0}
            params["original_max_position_embeddings"] = 8192
        max_pos = int(params["original_max_position_embeddings"] * params["factor"])
        assert_same(rope_inv_freq(dim, base, params), hf_rope_init(dim, base, max_pos, params))


def test_longrope_matches_transformers_short_and_long(hf_rope_init):
    rng = random.Random(4)
    for i in range(CASES):
        dim, base, factor, original = random_case(rng)
        params = {
            "rope_type": "longrope",
            "short_factor": [rng.uniform(1, 2) for _ in range(dim // 2)],
            "long_factor": [rng.uniform(1, factor) for _ in range(dim // 2)],
            "original_max_position_embeddings": original,
        }
        if i % 3 == 0:
            params["factor"] = factor
        if i % 4 == 1:
            params["attention_factor"] = rng.uniform(0.8, 1.5)
        max_pos = int(original * factor)
        ours_params = {**params, "max_position_embeddings": max_pos}
        for seq_len in seq_lens(rng, original):
            ours = rope_inv_freq(dim, base, ours_params, seq_len)
            assert_same(ours, hf_rope_init(dim, base, max_pos, params, seq_len))
    # seq_len picks the factors: long past the original length, short up to it
    short, _ = rope_inv_freq(dim, base, ours_params, original)
    long, _ = rope_inv_freq(dim, base, ours_params, original + 1)
    assert not torch.allclose(short, long)


# p-RoPE (Gemma): a grid of head dims x partial factors x factors, random bases
PROPORTIONAL = [
    (dh, prf, factor)
    for dh in (16, 64, 128, 512)
    for prf in (0.25, 0.5, 1.0)
    for factor in (None, 1.0, 8.0)
]


def proportional(prf, factor):
    return {"rope_type": "proportional", "partial_rotary_factor": prf} | (
        {} if factor is None else {"factor": factor}
    )


@pytest.mark.parametrize(("head_dim", "prf", "factor"), PROPORTIONAL)
def test_proportional_matches_transformers(head_dim, prf, factor, hf_rope_init):
    """Frequencies over the whole head dim, the first int(prf * Dh // 2) pairs turning, the
    others at 0, all / factor: transformers' numbers, bit for bit."""
    rng = random.Random(f"{head_dim}{prf}{factor}")
    for base in (10000.0, 1e6, 10 ** rng.uniform(3, 7)):
        params = proportional(prf, factor)
        ours = rope_inv_freq(head_dim, base, params)
        theirs = hf_rope_init(head_dim, base, 4096, params)
        assert_same(ours, theirs)
        assert torch.equal(ours[0], theirs[0].float())
        turning = int(prf * head_dim // 2)
        assert ours[0].shape == (head_dim // 2,) and (ours[0][:turning] > 0).all()
        assert not ours[0][turning:].any()


@pytest.mark.parametrize(("head_dim", "prf", "factor"), PROPORTIONAL[::4])
def test_proportional_rope_matches_transformers_cos_sin_and_rotation(
    head_dim, prf, factor, hf_rope, hf_apply, hf_cos_sin64
):
    """posenc.build("rope", scaling=proportional): the whole head is the rotary dim; cos, sin
    and rotated q / k (grouped-query k, [B, T] positions up to 10^6) within 1e-5 of
    transformers' formula in float64; the pairs at frequency 0 pass through unchanged."""
    rng = random.Random(head_dim)
    torch.manual_seed(head_dim)
    base, params = 10 ** rng.uniform(4, 6.5), proportional(prf, factor)
    enc = posenc.build("rope", dim=4 * head_dim, heads=4, base=base, scaling=params)
    assert enc.rotary_dim() == head_dim  # not prf * head_dim: p-RoPE rotates the whole head
    module = hf_rope(head_dim, base, 4096, params)
    pos = torch.randint(0, 10**6, (2, 9))
    cos64, sin64 = hf_cos_sin64(module, pos)  # [B, T, Dh]
    cos, sin = rope_cos_sin(pos, enc.inv_freq)  # [B, T, Dh / 2]
    assert (torch.cat((cos, cos), -1) - cos64).abs().max() <= 1e-5
    assert (torch.cat((sin, sin), -1) - sin64).abs().max() <= 1e-5
    q, k = torch.randn(2, 4, 9, head_dim), torch.randn(2, 2, 9, head_dim)
    q_ref, _ = hf_apply(q.double(), k.repeat_interleave(2, 1).double(), cos64, sin64)
    _, k_ref = hf_apply(q[:, :2].double(), k.double(), cos64, sin64)
    q2, k2 = enc.rotate(q, k, pos, pos)
    assert (q2 - q_ref).abs().max() <= 1e-5 and (k2 - k_ref).abs().max() <= 1e-5
    half, turning = head_dim // 2, int(prf * head_dim // 2)
    still = [*range(turning, half), *range(half + turning, head_dim)]  # pairs (i, i + Dh/2)
    assert torch.equal(q2[..., still], q[..., still])


def test_ntk_is_the_static_base_change(hf_rope_init):
    """ntk is not in transformers: check the formula base' = base * s^(d/(d-2)) in float64,
    transformers' dynamic at the length where the two coincide, L = L0 (2 - 1/s), and
    rotary-embedding-torch's theta_rescale_factor, which is the same change of base."""
    ret = pytest.importorskip("rotary_embedding_torch")
    rng = random.Random(5)
    for _ in range(CASES):
        dim, base, _, original = random_case(rng)
        factor = float(rng.choice([2, 4, 8, 16, 32]))
        ours, af = rope_inv_freq(dim, base, {"rope_type": "ntk", "factor": factor})
        assert af == 1.0
        new_base = base * factor ** (dim / (dim - 2))
        formula = new_base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        torch.testing.assert_close(ours.double(), formula, rtol=2e-6, atol=0)
        seq_len = original * (2 * factor - 1) / factor
        assert seq_len == int(seq_len)
        dynamic = hf_rope_init(
            dim, base, original, {"rope_type": "dynamic", "factor": factor}, int(seq_len)
        )
        assert_same((ours, af), dynamic)
        lucid = ret.RotaryEmbedding(dim, theta=base, theta_rescale_factor=factor).freqs.detach()
        torch.testing.assert_close(ours, lucid, rtol=2e-6, atol=0)


def test_ntk_golden_value():
    # d = 4, base 10000, s = 4: base' = 10000 * 4^2 = 160000, inv_freq = [1, 160000^-1/2]
    inv_freq, _ = rope_inv_freq(4, 10000.0, {"rope_type": "ntk", "factor": 4.0})
    torch.testing.assert_close(inv_freq, torch.tensor([1.0, 1 / 400.0]))


def test_registry_signature_and_rope_theta_override():
    assert set(ROPE_SCALING) == {
        "default",
        "linear",
        "ntk",
        "dynamic",
        "yarn",
        "dynamic_yarn",
        "llama3",
        "longrope",
        "proportional",
    }
    inv, af = ROPE_SCALING["default"](4, 100.0, {}, None)  # 100^(-2i/4)
    torch.testing.assert_close(inv, torch.tensor([1.0, 0.1]))
    assert af == 1.0
    # a ported v5 `rope_parameters` dict carries its own base
    a, _ = rope_inv_freq(4, 10000.0, {"rope_type": "default", "rope_theta": 100.0})
    torch.testing.assert_close(a, inv)


@pytest.mark.parametrize("seq_len", [None, 1, 1024, 2048, 3000, 4096, 16384])
def test_dynamic_yarn_is_yarn_at_the_length_over_the_context(seq_len):
    """Dynamic-YaRN (Peng et al. 2023): the unscaled frequencies up to the context L0, exactly;
    past it YaRN with factor seq_len / L0."""
    params = {"rope_type": "dynamic_yarn", "original_max_position_embeddings": 2048}
    got, af = ROPE_SCALING["dynamic_yarn"](64, 1e4, params, seq_len)
    if seq_len is None or seq_len <= 2048:
        want, want_af = ROPE_SCALING["default"](64, 1e4, {}, None)
    else:
        yarn = {
            "rope_type": "yarn",
            "factor": seq_len / 2048,
            "original_max_position_embeddings": 2048,
        }
        want, want_af = ROPE_SCALING["yarn"](64, 1e4, yarn, seq_len)
    assert torch.equal(got, want) and af == want_af


# ------------------------------------------------------------------------------- bad input


def test_unknown_rope_type_lists_known_ones_closest_first():
    with pytest.raises(
        ValueError, match=r"unknown rope_type 'yarm'.*closest first\): yarn, "
    ) as err:
        rope_inv_freq(64, 10000.0, {"rope_type": "yarm", "factor": 2.0})
    for name in ROPE_SCALING:
        assert name in str(err.value)


@pytest.mark.parametrize(
    "params, key",
    [
        ({"rope_type": "linear"}, "factor"),
        ({"rope_type": "ntk"}, "factor"),
        ({"type": "dynamic", "original_max_position_embeddings": 2048}, "factor"),
        ({"rope_type": "dynamic", "factor": 2.0}, "original_max_position_embeddings"),
        ({"rope_type": "yarn", "factor": 2.0}, "original_max_position_embeddings"),
        ({"rope_type": "yarn", "original_max_position_embeddings": 2048}, "factor"),
        ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0}, "high_freq_factor"),
        (
            {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1, "high_freq_factor": 4},
            "original_max_position_embeddings",
        ),
        (
            {"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [1.0] * 4},
            "original_max_position_embeddings",
        ),
        ({"rope_type": "longrope", "long_factor": [1.0] * 4}, "short_factor"),
    ],
)
def test_missing_required_key_names_key_and_rope_type(params, key):
    rope_type = params.get("rope_type", params.get("type"))
    with pytest.raises(ValueError, match=rf"rope_type='{rope_type}'.*'{key}'"):
        rope_inv_freq(8, 10000.0, params)


def test_bad_dims():
    with pytest.raises(ValueError, match="dim must be an even int >= 2, got 7"):
        rope_inv_freq(7)
    with pytest.raises(ValueError, match="needs dim > 2"):
        rope_inv_freq(2, 10000.0, {"rope_type": "ntk", "factor": 2.0})
    longrope = {
        "rope_type": "longrope",
        "short_factor": [1.0] * 3,
        "long_factor": [1.0] * 4,
        "original_max_position_embeddings": 64,
        "factor": 2.0,
    }
    with pytest.raises(ValueError, match="short_factor must have dim // 2 = 4 entries, got 3"):
        rope_inv_freq(8, 10000.0, longrope)


def test_yarn_without_factor_needs_both_lengths():
    """DeepSeek-style YaRN (no factor) takes max / original only when both are given; a bare
    yarn dict is refused instead of silently becoming factor 1."""
    with pytest.raises(ValueError, match="needs the key 'factor'"):
        rope_inv_freq(16, 10000.0, {"rope_type": "yarn", "max_position_embeddings": 64})
    inv, _ = rope_inv_freq(
        16, 1e4, {"rope_type": "yarn", "max_position_embeddings": 256,
                  "original_max_position_embeddings": 64},
    )  # fmt: skip
    ref, _ = rope_inv_freq(
        16, 1e4, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    )
    torch.testing.assert_close(inv, ref)
