"""posenc.functional, rotary: apply_rope against transformers and rotary-embedding-torch,
hypothesis properties, precision at large positions, bad input."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.functional import (
    apply_rope,
    rope_cos_sin,
    rope_inv_freq,
)

PROPS = settings(max_examples=25, deadline=None)
LAYOUTS = ["half", "interleaved"]


# ----------------------------------------------------------------------------------- parity


@pytest.mark.parametrize(
    "params",
    [
        None,
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 1024,
        },
    ],
)
def test_half_layout_matches_transformers(params, hf_rope, hf_apply, hf_cos_sin64):
    """[B, T] positions (left padding / offsets), transformers' own module and rotation. Its
    formula is evaluated in float64 (its float32 angles are off by up to 4000 * 2^-24 rad
    here); posenc's float32 result is within 1e-5 of it, closer than transformers' own."""
    torch.manual_seed(0)
    B, H, T, Dh, base = 2, 3, 9, 64, 500000.0
    rope = hf_rope(Dh, base, 4096, params)
    q, k = torch.randn(B, H, T, Dh), torch.randn(B, H, T, Dh)
    pos = torch.randint(0, 4000, (B, T))
    q_ref, k_ref = hf_apply(q.double(), k.double(), *hf_cos_sin64(rope, pos))
    q_hf, _ = hf_apply(q, k, *rope(q, pos))
    inv_freq, af = rope_inv_freq(Dh, base, params)
    assert af == pytest.approx(rope.attention_scaling)
    err = (apply_rope(q, pos, inv_freq, attention_factor=af) - q_ref).abs().max()
    assert err <= 1e-5 and err <= (q_hf - q_ref).abs().max()
    cos, sin = rope_cos_sin(pos, inv_freq, af)  # once for q and k
    q2, k2 = (apply_rope(x, cos=cos, sin=sin) for x in (q, k))
    assert (q2 - q_ref).abs().max() <= 1e-5 and (k2 - k_ref).abs().max() <= 1e-5


def test_half_layout_partial_rotary_matches_transformers(hf_rope, hf_apply, hf_cos_sin64):
    """Partial rotary as GPT-NeoX / Phi do it: rotate q[..., :R], pass the rest through."""
    torch.manual_seed(1)
    B, H, T, Dh, R = 2, 2, 7, 80, 32
    rope = hf_rope(R, 10000.0)  # inv_freq of the rotary dim, as partial_rotary_factor gives
    q, k = torch.randn(B, H, T, Dh), torch.randn(B, H, T, Dh)
    pos = torch.arange(100, 100 + T)
    cos, sin = hf_cos_sin64(rope, pos[None])
    q_rot, _ = hf_apply(q[..., :R].double(), k[..., :R].double(), cos, sin)
    q_ref = torch.cat([q_rot, q[..., R:].double()], dim=-1)
    inv_freq, _ = rope_inv_freq(R)
    out = apply_rope(q, pos, inv_freq, rotary_dim=R)
    assert (out - q_ref).abs().max() <= 1e-5
    assert torch.equal(out[..., R:], q[..., R:])


@pytest.mark.parametrize("R", [64, 32])
def test_interleaved_layout_matches_rotary_embedding_torch(R):
    ret = pytest.importorskip("rotary_embedding_torch")
    torch.manual_seed(2)
    B, H, T, Dh, offset = 2, 3, 11, 64, 37
    rot = ret.RotaryEmbedding(dim=R, theta=20000).double()  # its formula, float64 angles
    q = torch.randn(B, H, T, Dh)
    ref = rot.rotate_queries_or_keys(q.double(), offset=offset)
    inv_freq, _ = rope_inv_freq(R, 20000.0)
    out = apply_rope(q, torch.arange(offset, offset + T), inv_freq, layout="interleaved")
    assert (out - ref).abs().max() <= 1e-5


def test_interleaved_float_positions_match_rotary_embedding_torch():
    """Float positions (interpolation) through rotary-embedding-torch's apply_rotary_emb."""
    ret = pytest.importorskip("rotary_embedding_torch")
    torch.manual_seed(3)
    rot = ret.RotaryEmbedding(dim=32).double()  # its formula, float64 angles
    pos = torch.rand(13) * 500
    x = torch.randn(2, 4, 13, 48)
    ref = ret.apply_rotary_emb(rot(pos.double()), x.double())
    out = apply_rope(x, pos, rope_inv_freq(32)[0], layout="interleaved")
    assert (out - ref).abs().max() <= 1e-5


def test_float_positions_are_linear_interpolation():
    torch.manual_seed(4)
    x, pos = torch.randn(1, 2, 10, 16, dtype=torch.float64), torch.arange(10) * 3
    inv_freq, _ = rope_inv_freq(16, 10000.0, {"rope_type": "linear", "factor": 4.0})
    plain, _ = rope_inv_freq(16)
    torch.testing.assert_close(apply_rope(x, pos / 4.0, plain), apply_rope(x, pos, inv_freq))


# -------------------------------------------------------------------- positions and dtypes


def test_batched_and_broadcast_positions():
    torch.manual_seed(5)
    x, inv_freq = torch.randn(3, 2, 6, 8), rope_inv_freq(8)[0]
    pos = torch.randint(0, 50, (3, 6))
    out = apply_rope(x, pos, inv_freq)
    for b in range(3):
        torch.testing.assert_close(out[b : b + 1], apply_rope(x[b : b + 1], pos[b], inv_freq))
    torch.testing.assert_close(apply_rope(x, pos[:, None, :], inv_freq), out)  # [B, 1, T]
    # x without a head axis [B, T, D] with [B, T] positions
    torch.testing.assert_close(apply_rope(x[:, 0], pos, inv_freq), out[:, 0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_dtype_kept_and_inplace(dtype, layout):
    torch.manual_seed(6)
    x, inv_freq = torch.randn(2, 2, 5, 12, dtype=dtype), rope_inv_freq(8)[0]
    pos = torch.arange(3, 8)
    out = apply_rope(x, pos, inv_freq, layout=layout, rotary_dim=8)
    assert out.dtype == dtype and out.shape == x.shape
    ref = apply_rope(x.double(), pos, inv_freq, layout=layout)
    tol = {torch.float16: 2e-3, torch.bfloat16: 2e-2}.get(dtype, 1e-5)
    torch.testing.assert_close(out.double(), ref, atol=tol, rtol=tol)
    y = x.clone()
    assert apply_rope(y, pos, inv_freq, layout=layout, rotary_dim=8, inplace=True) is y
    assert torch.equal(y, out)


def test_autograd_matches_finite_differences():
    torch.manual_seed(7)
    x = torch.randn(1, 2, 3, 6, dtype=torch.float64, requires_grad=True)
    pos, inv_freq = torch.tensor([0.0, 2.5, 9.0], dtype=torch.float64), rope_inv_freq(4)[0]
    for layout in LAYOUTS:
        assert torch.autograd.gradcheck(
            lambda t, lay=layout: apply_rope(t, pos, inv_freq, lay), (x,)
        )
    xh = torch.randn(1, 1, 3, 8, dtype=torch.bfloat16, requires_grad=True)
    apply_rope(xh, pos, inv_freq).float().sum().backward()
    assert xh.grad is not None and xh.grad.dtype == torch.bfloat16


def test_qk_share_cos_sin_and_decode_offsets():
    torch.manual_seed(8)
    q, k, inv_freq = torch.randn(2, 4, 3, 16), torch.randn(2, 2, 10, 16), rope_inv_freq(16)[0]
    k_pos = torch.arange(10)
    cos, sin = rope_cos_sin(k_pos, inv_freq)  # built once: q takes the last 3 rows
    q2, k2 = apply_rope(q, cos=cos[-3:], sin=sin[-3:]), apply_rope(k, cos=cos, sin=sin)
    torch.testing.assert_close(q2, apply_rope(q, k_pos[-3:], inv_freq))
    torch.testing.assert_close(k2, apply_rope(k, k_pos, inv_freq))
    torch.testing.assert_close(apply_rope(k, cos=cos, sin=sin, engine="reference"), k2)


# ---------------------------------------------------------------------- properties


@PROPS
@given(
    n=st.integers(0, 10_000),
    m=st.integers(0, 10_000),
    shift=st.integers(0, 10_000),
    layout=st.sampled_from(LAYOUTS),
    seed=st.integers(0, 2**16),
)
def test_score_depends_only_on_position_difference(n, m, shift, layout, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, 32, generator=g, dtype=torch.float64)  # [T=1, Dh] each
    inv_freq = rope_inv_freq(32)[0]

    def score(a, b):
        qa = apply_rope(q, torch.tensor([a]), inv_freq, layout)
        kb = apply_rope(k, torch.tensor([b]), inv_freq, layout)
        return (qa * kb).sum()

    torch.testing.assert_close(score(n, m), score(n + shift, m + shift), rtol=1e-9, atol=1e-9)


@PROPS
@given(
    pos=st.lists(st.floats(0, 1e5, allow_nan=False), min_size=1, max_size=6),
    layout=st.sampled_from(LAYOUTS),
    rotary=st.sampled_from([2, 8, 16]),
    seed=st.integers(0, 2**16),
)
def test_norm_preserved_and_position_zero_is_identity(pos, layout, rotary, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, len(pos), 16, generator=g, dtype=torch.float64)
    inv_freq = rope_inv_freq(rotary, 500.0)[0]
    out = apply_rope(x, torch.tensor(pos, dtype=torch.float64), inv_freq, layout)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=1e-12)
    # position 0 is the identity, bit for bit
    assert torch.equal(apply_rope(x, torch.zeros(len(pos)), inv_freq, layout), x)


# ---------------------------------------------------------------------------- precision


def test_bfloat16_at_position_one_million_is_bf16_rounding_of_float64():
    torch.manual_seed(9)
    x = torch.randn(2, 4, 8, 64).bfloat16()
    pos = torch.arange(1_000_000, 1_000_008)
    inv_freq = rope_inv_freq(64)[0]
    out = apply_rope(x, pos, inv_freq)
    assert out.dtype == torch.bfloat16
    # float64 reference: the same float32 frequencies, every step in float64
    ref = apply_rope(x.double(), pos, inv_freq)
    # within bfloat16 rounding: half an ulp of the reference (8 significant bits), a hair more
    # for values that sit on a rounding boundary
    _, exponent = torch.frexp(ref)
    half_ulp = torch.ldexp(torch.ones_like(ref), exponent - 9)
    assert ((out.double() - ref).abs() <= half_ulp * 1.001 + 1e-30).all()
    assert (out == ref.bfloat16()).float().mean() > 0.999
    # float32 angles (transformers' way) are off by up to ~0.03 rad at 1e6: the check has teeth
    angles32 = pos.float()[:, None] * inv_freq
    cos, sin = angles32.cos(), angles32.sin()
    naive = apply_rope(x, cos=cos, sin=sin, engine="reference")
    assert not ((naive.double() - ref).abs() <= half_ulp * 1.001).all()


# ---------------------------------------------------------------------------- bad input


def test_odd_rotary_dim():
    with pytest.raises(ValueError, match=r"rotary_dim must be an even int >= 2.*got 7"):
        apply_rope(torch.randn(1, 4, 16), torch.arange(4), rope_inv_freq(8)[0], rotary_dim=7)


def test_rotary_dim_larger_than_head_dim():
    with pytest.raises(
        ValueError, match=r"rotary_dim must be <= the head dim Dh=8.*2\.\.8.*got 16"
    ):
        apply_rope(torch.randn(1, 4, 8), torch.arange(4), rope_inv_freq(16)[0], rotary_dim=16)
    with pytest.raises(ValueError, match=r"rotary dim R = 16 > the head dim Dh=8"):
        apply_rope(torch.randn(1, 4, 8), torch.arange(4), rope_inv_freq(16)[0])


def test_negative_positions():
    with pytest.raises(ValueError, match=r"positions must be >= 0, got a minimum of -1"):
        apply_rope(torch.randn(1, 4, 8), torch.tensor([0, 1, -1, 2]), rope_inv_freq(8)[0])


def test_non_tensor_positions():
    with pytest.raises(TypeError, match="positions must be a torch.Tensor, got list"):
        apply_rope(torch.randn(1, 4, 8), [0, 1, 2, 3], rope_inv_freq(8)[0])


def test_bad_layout():
    with pytest.raises(
        ValueError, match=r"layout must be one of \('half', 'interleaved'\), got 'neox'"
    ):
        apply_rope(torch.randn(1, 4, 8), torch.arange(4), rope_inv_freq(8)[0], layout="neox")


def test_positions_that_do_not_fit_x():
    with pytest.raises(ValueError, match=r"positions of shape \(5,\) do not broadcast"):
        apply_rope(torch.randn(2, 3, 4, 8), torch.arange(5), rope_inv_freq(8)[0])
