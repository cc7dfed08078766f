"""posenc.rotary: RoPE (with scaling), xPos and axial 2-D RoPE against transformers and
rotary-embedding-torch; properties; constructor and bad input."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.encodings.rotary import ENCODINGS, RoPE, RoPE2D, XPos
from posenc.functional import apply_rope, rope_inv_freq

PROPS = settings(max_examples=20, deadline=None)


def scores(q, k):
    """q [B, H, Tq, Dh], k [B, Hkv, Tk, Dh] -> [B, H, Tq, Tk] (kv heads repeated)."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    return q @ k.transpose(-1, -2)


# ---------------------------------------------------------------------------------- RoPE


@pytest.mark.parametrize(
    "params, k_len",
    [
        ({"rope_type": "default"}, 16),
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}, 16),
        (
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
            16,
        ),
        ({"rope_type": "dynamic", "factor": 4.0}, 200),  # past max_len = 64: a new base
        (
            {
                "rope_type": "longrope",
                "short_factor": [1.0 + i / 16 for i in range(16)],
                "long_factor": [1.0 + i for i in range(16)],
                "original_max_position_embeddings": 64,
            },
            40,
        ),
        (
            {
                "rope_type": "longrope",
                "short_factor": [1.0 + i / 16 for i in range(16)],
                "long_factor": [1.0 + i for i in range(16)],
                "original_max_position_embeddings": 64,
            },
            100,
        ),
    ],
)
def test_rope_matches_transformers_rotary_module(params, k_len, hf_rope, hf_apply):
    """The model-level path: transformers' rotary module (with its dynamic / longrope updates)
    and apply_rotary_pos_emb, grouped-query k, [B, T] positions."""
    torch.manual_seed(0)
    Dh, base, max_pos = 32, 10000.0, 256 if params["rope_type"] in ("longrope",) else 64
    module = hf_rope(Dh, base, max_pos, params)
    ours = RoPE(dim=4 * Dh, heads=4, train_len=max_pos, base=base, scaling=params)
    q, k = torch.randn(2, 4, k_len, Dh), torch.randn(2, 2, k_len, Dh)
    pos = torch.arange(k_len).expand(2, -1)
    cos, sin = module(q, pos)
    q_ref, _ = hf_apply(q, k.repeat_interleave(2, 1), cos, sin)
    _, k_ref = hf_apply(q[:, :2], k, cos, sin)
    q2, k2 = ours.rotate(q, k, pos, pos)
    assert (q2 - q_ref).abs().max() <= 1e-5 and (k2 - k_ref).abs().max() <= 1e-5


def test_dynamic_uses_the_current_key_length_and_decoding_equals_full():
    torch.manual_seed(1)
    rope = RoPE(head_dim=16, train_len=32, scaling={"rope_type": "dynamic", "factor": 4.0})
    q, k = torch.randn(1, 2, 100, 16), torch.randn(1, 2, 100, 16)
    pos = torch.arange(100)
    full = scores(*rope.rotate(q, k, pos, pos))[..., -1:, :]
    step = scores(*rope.rotate(q[:, :, -1:], k, pos[-1:], pos))
    torch.testing.assert_close(step, full)
    # within the original length dynamic is plain RoPE; past it the base grows with the keys
    plain = RoPE(head_dim=16)
    short = pos[:32]
    torch.testing.assert_close(rope.angles(short), plain.angles(short))
    assert not torch.allclose(rope.angles(pos)[:32], plain.angles(short))
    assert not torch.allclose(rope.angles(torch.arange(200))[:32], rope.angles(pos)[:32])


def test_rope_angles_and_partial_rotary():
    rope = RoPE(head_dim=12, rotary_dim=8, base=100.0)
    pos = torch.arange(5)
    angles = rope.angles(pos)
    assert angles.dtype == torch.float64 and angles.shape == (5, 4)
    expected = pos[:, None] * 100.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    torch.testing.assert_close(angles, expected, rtol=1e-6, atol=0)  # float32 frequencies
    q = torch.randn(1, 1, 5, 12)
    q2, _ = rope.rotate(q, q, pos, pos)
    assert torch.equal(q2[..., 8:], q[..., 8:])
    torch.testing.assert_close(q2, apply_rope(q, pos, rope_inv_freq(8, 100.0)[0]))
    # a ported partial_rotary_factor gives the rotary dim
    assert (
        RoPE(
            head_dim=64, scaling={"rope_type": "default", "partial_rotary_factor": 0.25}
        ).rotary_dim()
        == 16
    )


# ---------------------------------------------------------------------------------- xPos


@pytest.mark.parametrize("T", [12, 11])
def test_xpos_matches_rotary_embedding_torch(T):
    """rotary-embedding-torch centres the xPos exponents on T // 2, as XPos does for
    positions arange(T) (c = ceil((0 + T - 1) / 2) = T // 2), so the outputs match directly."""
    ret = pytest.importorskip("rotary_embedding_torch")
    torch.manual_seed(2)
    q, k = torch.randn(2, 3, T, 32), torch.randn(2, 3, T, 32)
    q_ref, k_ref = ret.RotaryEmbedding(dim=32, use_xpos=True).rotate_queries_and_keys(q, k)
    xpos = XPos(head_dim=32, layout="interleaved")
    pos = torch.arange(T)
    q2, k2 = xpos.rotate(q, k, pos, pos)
    assert (q2 - q_ref).abs().max() <= 1e-5 and (k2 - k_ref).abs().max() <= 1e-5
    torch.testing.assert_close(scores(q2, k2), scores(q_ref, k_ref), rtol=1e-5, atol=1e-5)


def test_xpos_decays_and_decoding_equals_full():
    """Unlike rotary-embedding-torch's rotate_queries_with_cached_keys, which centres queries
    on Tq // 2 and keys on Tk // 2 (scores then change with Tq), a decoding step gives the
    full forward's scores."""
    torch.manual_seed(3)
    xpos = XPos(head_dim=16, scale_base=8)
    q, k = torch.randn(1, 2, 40, 16), torch.randn(1, 1, 40, 16)
    pos = torch.arange(40)
    full = scores(*xpos.rotate(q, k, pos, pos))
    step = scores(*xpos.rotate(q[:, :, -1:], k, pos[-1:], pos))
    torch.testing.assert_close(step, full[..., -1:, :], rtol=1e-5, atol=1e-5)
    # the paper's score for q = k = ones: sum_i zeta_i^((n - m) / scale_base) 2 cos((n - m) theta_i)
    ones = torch.ones(1, 1, 40, 16, dtype=torch.float64)
    s = scores(*xpos.rotate(ones, ones, pos, pos))[0, 0, -1]
    d = (39 - pos).double()[:, None]
    zeta = (torch.arange(0, 16, 2) + 0.4 * 16) / (1.4 * 16)
    theta = rope_inv_freq(16)[0].double()
    torch.testing.assert_close(s, (zeta ** (d / 8) * 2 * torch.cos(d * theta)).sum(-1))


def test_xpos_large_positions_stay_finite():
    """Without centring, keys at 100k would be scaled by 0.29^(-100000/512) = inf."""
    xpos = XPos(head_dim=16)
    pos = torch.arange(100_000, 100_016)
    q, k = xpos.rotate(torch.randn(1, 1, 16, 16), torch.randn(1, 1, 16, 16), pos, pos)
    assert torch.isfinite(q).all() and torch.isfinite(k).all()


@PROPS
@given(
    n=st.integers(0, 3000),
    m=st.integers(0, 3000),
    shift=st.integers(0, 20_000),
    layout=st.sampled_from(["half", "interleaved"]),
    seed=st.integers(0, 2**16),
)
def test_xpos_score_depends_only_on_position_difference(n, m, shift, layout, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, 1, 1, 16, generator=g, dtype=torch.float64)
    xpos = XPos(head_dim=16, layout=layout)

    def score(a, b):
        return scores(*xpos.rotate(q, k, torch.tensor([a]), torch.tensor([b]))).squeeze()

    torch.testing.assert_close(score(n, m), score(n + shift, m + shift), rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------------------- RoPE 2-D


@pytest.mark.parametrize("Dh, R", [(32, 32), (48, 32)])
def test_rope_2d_matches_rotary_embedding_torch_axial(Dh, R):
    """rotary-embedding-torch's axial frequencies: RotaryEmbedding(R/2).get_axial_freqs(h, w),
    applied with its interleaved rotate_half."""
    ret = pytest.importorskip("rotary_embedding_torch")
    torch.manual_seed(4)
    h, w = 3, 5
    freqs = ret.RotaryEmbedding(dim=R // 2, theta=100).get_axial_freqs(h, w)  # [h, w, R]
    x = torch.randn(2, 4, h, w, Dh)
    ref = ret.apply_rotary_emb(freqs, x).flatten(2, 3)
    grid = torch.stack(torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij"), -1)
    pos = grid.reshape(h * w, 2)
    rope = RoPE2D(head_dim=Dh, rotary_dim=R, base=100, layout="interleaved")
    q2, k2 = rope.rotate(x.flatten(2, 3), x.flatten(2, 3), pos, pos)
    assert (q2 - ref).abs().max() <= 1e-5 and torch.equal(q2, k2)
    assert rope.angles(pos).shape == (h * w, R // 2)


@PROPS
@given(
    a=st.tuples(st.integers(0, 500), st.integers(0, 500)),
    b=st.tuples(st.integers(0, 500), st.integers(0, 500)),
    shift=st.tuples(st.integers(0, 500), st.integers(0, 500)),
    layout=st.sampled_from(["half", "interleaved"]),
    seed=st.integers(0, 2**16),
)
def test_rope_2d_score_depends_only_on_the_2d_offset(a, b, shift, layout, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, 1, 1, 16, generator=g, dtype=torch.float64)
    rope = RoPE2D(head_dim=16, layout=layout)

    def score(p, r):
        return scores(*rope.rotate(q, k, torch.tensor([p]), torch.tensor([r]))).squeeze()

    moved = (tuple(x + s for x, s in zip(a, shift)), tuple(x + s for x, s in zip(b, shift)))
    torch.testing.assert_close(score(a, b), score(*moved), rtol=1e-9, atol=1e-9)
    # rows and columns are told apart: (r, c) and (c, r) rotate differently
    if a[0] != a[1]:
        assert not torch.allclose(
            rope.angles(torch.tensor([a])), rope.angles(torch.tensor([a[::-1]]))
        )


# ------------------------------------------------------------------------ registry, bad input


def test_registry_and_class_attributes():
    assert set(ENCODINGS) == {"rope", "xpos", "rope_2d"}
    for name, cls in ENCODINGS.items():
        assert posenc.ENCODINGS[name] is cls
        assert cls.family == "rotary" and cls.paper and cls.summary
        enc = posenc.build(name, dim=64, heads=4, head_dim=16, max_len=128)
        assert enc.rotary_dim() == 16 and enc.max_len == 128  # the hard limit
        with pytest.raises(TypeError):
            cls(head_dim=16, bogus=1)
        with pytest.raises(TypeError):
            cls(16)
    assert RoPE2D.position_dims == 2 and RoPE.position_dims == 1 and XPos.position_dims == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["rope", "xpos", "rope_2d"])
def test_dtype_in_equals_dtype_out_and_half_precision_at_large_positions(name, dtype):
    """Half precision at 1e6 gets float64 angles; float32 keeps transformers' float32 angles
    (exact below 2^24, see ROPE_F64_FROM), so it is checked at moderate positions."""
    enc = posenc.build(name, head_dim=16)
    start = 1000 if dtype == torch.float32 else 1_000_000
    pos = torch.arange(start, start + 4)
    if name == "rope_2d":
        pos = torch.stack([pos, pos // 2], -1)
    q = torch.randn(1, 2, 4, 16)
    q2, k2 = enc.rotate(q.to(dtype), q.to(dtype), pos, pos)
    assert q2.dtype == k2.dtype == dtype
    ref, _ = enc.rotate(q.to(dtype).double(), q.to(dtype).double(), pos, pos)
    # float32: angles rounded like transformers', up to 1000 * 2^-24 rad (x ~ 3: ~2e-4)
    tol = {torch.float32: 3e-4, torch.bfloat16: 1e-2, torch.float16: 2e-3}[dtype]
    torch.testing.assert_close(q2.double(), ref, rtol=tol, atol=tol)


def test_constructor_errors():
    with pytest.raises(ValueError, match=r"rotary_dim must be a positive multiple of 2.*got 7"):
        RoPE(head_dim=16, rotary_dim=7)
    with pytest.raises(ValueError, match=r"rotary_dim must be <= head_dim=16.*got 32"):
        XPos(head_dim=16, rotary_dim=32)
    with pytest.raises(ValueError, match=r"rotary_dim must be a positive multiple of 4.*got 6"):
        RoPE2D(head_dim=16, rotary_dim=6)
    with pytest.raises(ValueError, match=r"head_dim=7 is not a multiple of 2: pass rotary_dim="):
        RoPE(head_dim=7)
    with pytest.raises(ValueError, match=r"layout must be one of \('half', 'interleaved'\)"):
        RoPE(head_dim=16, layout="neox")
    with pytest.raises(ValueError, match=r"unknown rope_type 'ntk_aware'"):
        RoPE(head_dim=16, scaling={"rope_type": "ntk_aware", "factor": 2.0})
    with pytest.raises(ValueError, match=r"rope_type='llama3' needs the key 'low_freq_factor'"):
        RoPE(head_dim=16, train_len=64, scaling={"rope_type": "llama3", "factor": 8.0})


def test_rotate_errors():
    rope = RoPE(head_dim=16)
    q = torch.randn(1, 1, 4, 16)
    with pytest.raises(ValueError, match="k_pos must be >= 0"):
        rope.rotate(q, q, torch.arange(4), torch.arange(-1, 3))
    with pytest.raises(
        ValueError, match="head dim 8, but this encoding was built with head_dim=16"
    ):
        rope.rotate(q[..., :8], q[..., :8], torch.arange(4), torch.arange(4))
    with pytest.raises(ValueError, match=r"positions must have a trailing axis of size 2"):
        RoPE2D(head_dim=16).angles(torch.arange(4))


def test_scaling_dict_ports_as_is():
    """A v5 rope_parameters dict: its rope_theta is the base; unknown keys warn once."""
    params = {"rope_type": "default", "rope_theta": 500000.0, "mrope_section": [1, 2]}
    with pytest.warns(UserWarning, match=r"ignoring unrecognized keys \['mrope_section'\]"):
        rope = RoPE(head_dim=8, scaling=params)
    assert rope.base == 500000.0
    torch.testing.assert_close(rope.inv_freq, rope_inv_freq(8, 500000.0)[0])


def test_a_rotary_encoding_that_defines_only_its_angles_rotates_by_them():
    """RotaryEncoding derives rotate and angles from _angles (CONTRIBUTING's recipe): a
    subclass that defines _angles alone declares both, and with RoPE's angles rotates as
    rope does, [T] and [B, T] positions, in float32 and float64."""
    from posenc import functional as PF
    from posenc.encodings.rotary import RotaryEncoding

    class Angles(RotaryEncoding):
        paper, summary = "(test)", "RoPE's angles, rotate derived"

        def __init__(self, *, head_dim=None, max_len=None):
            super().__init__(
                dim=None, heads=None, head_dim=head_dim, base=500.0, layout="half", rotary_dim=4
            )
            self.max_len = max_len

        def _angles(self, positions, r, dtype):
            inv_freq, _ = PF.rope_inv_freq(r, self.base)
            return PF.position_angles(positions, inv_freq.to(positions.device), dtype)

    enc, rope = Angles(head_dim=8), RoPE(head_dim=8, base=500.0, rotary_dim=4)
    assert enc.provides == {"rotate", "angles"}
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        q, k = torch.randn(2, 4, 5, 8, dtype=dtype), torch.randn(2, 2, 5, 8, dtype=dtype)
        for pos in (torch.arange(3, 8), torch.randint(0, 50, (2, 5))):
            for got, want in zip(enc.rotate(q, k, pos, pos), rope.rotate(q, k, pos, pos)):
                torch.testing.assert_close(got, want)
            torch.testing.assert_close(enc.angles(pos), rope.angles(pos))
    with pytest.raises(ValueError, match="max_len=6"):
        Angles(head_dim=8, max_len=6).rotate(q, k, torch.arange(7), torch.arange(7))
