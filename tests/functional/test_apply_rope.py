"""posenc.functional.apply_rope, the one public RoPE function: every option against the
pure-PyTorch reference, no older alias beside it, bad input, and no DeprecationWarning from
inside posenc (a model forward of every rotary encoding)."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import functional, kernels
from posenc.functional import apply_rope, rope_cos_sin, rope_inv_freq

ENGINES = (None, "reference", "auto", "cpp", "eager")


@st.composite
def cases(draw):
    B, H, T = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 9))
    R = 2 * draw(st.integers(1, 6))
    Dh = R + 2 * draw(st.integers(0, 2))  # partial rotary when Dh > R
    layout = draw(st.sampled_from(["half", "interleaved"]))
    batch_pos = draw(st.booleans())  # [B, T] positions or [T]
    af = draw(st.sampled_from([1.0, 1.3]))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, H, T, Dh, generator=g)
    pos = torch.randint(0, 3000, (B, T) if batch_pos else (T,), generator=g)
    return x, pos, rope_inv_freq(R)[0], layout, af


def by_hand(x, pos, inv, layout, af):
    """The rotation written out in float64: (a, b) -> (a cos - b sin, b cos + a sin)."""
    r = 2 * inv.numel()
    ang = pos.double()[..., None] * inv.double()  # [*P, R/2]
    if ang.dim() == 3:
        ang = ang[:, None]  # [B, 1, T, R/2]
    cos, sin = ang.cos() * af, ang.sin() * af
    xr = x.double()[..., :r]
    a, b = xr.chunk(2, -1) if layout == "half" else (xr[..., 0::2], xr[..., 1::2])
    ra, rb = a * cos - b * sin, b * cos + a * sin
    rot = torch.cat((ra, rb), -1) if layout == "half" else torch.stack((ra, rb), -1).flatten(-2)
    return torch.cat((rot, x.double()[..., r:]), -1)


@settings(max_examples=20, deadline=None)
@given(case=cases(), engine=st.sampled_from(ENGINES), angles=st.sampled_from(["pos", "cos"]))
def test_every_option_equals_the_rotation(case, engine, angles):
    """positions or cos/sin, out of place / out= / in place, both layouts, partial rotary,
    [T] and [B, T] positions, every engine: the same rotation (float32 within 1e-5 of it)."""
    x, pos, inv, layout, af = case
    want = by_hand(x, pos, inv, layout, af).float()
    if angles == "pos":
        ang = dict(positions=pos, inv_freq=inv, attention_factor=af)
    else:
        cos, sin = rope_cos_sin(pos, inv, af)
        ang = dict(cos=cos, sin=sin)
    before = x.clone()
    got = apply_rope(x, **ang, layout=layout, engine=engine)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert torch.equal(x, before), "an out-of-place call changed its input"
    if engine != "reference":  # the reference has no out= (refused, tested below)
        out = torch.full_like(x, float("nan"))
        assert apply_rope(x, **ang, layout=layout, out=out, engine=engine) is out
        torch.testing.assert_close(out, want, atol=1e-5, rtol=0)
    y = x.clone()
    assert apply_rope(y, **ang, layout=layout, inplace=True, engine=engine) is y
    torch.testing.assert_close(y, want, atol=1e-5, rtol=0)
    r = 2 * inv.numel()
    torch.testing.assert_close(apply_rope(x, **ang, layout=layout, rotary_dim=r), want,
                               atol=1e-5, rtol=0)  # fmt: skip


@pytest.mark.parametrize("engine", ENGINES)
def test_gradients_are_the_inverse_rotation(engine):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 8, requires_grad=True)
    pos, inv = torch.arange(5), rope_inv_freq(8)[0]
    g = torch.randn(2, 3, 5, 8)
    (got,) = torch.autograd.grad(apply_rope(x, pos, inv, engine=engine), x, g)
    want = apply_rope(g, -pos.double(), inv, check=False)  # rotate back: angle -p w
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_out_that_overlaps_x_is_refused():
    buf = torch.randn(1, 2, 7, 8)
    x, pos, inv = buf[:, :, :6], torch.arange(6), rope_inv_freq(8)[0]
    for engine in (None, "cpp", "eager"):
        with pytest.raises(ValueError, match="out overlaps x"):
            apply_rope(x, pos, inv, out=buf[:, :, 1:], engine=engine)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(), TypeError, "positions and inv_freq, or cos and sin"),
        (dict(positions=torch.arange(4)), TypeError, "positions and inv_freq, or cos and sin"),
        (dict(cos=torch.ones(4, 4)), TypeError, "sin must be a torch.Tensor"),
        (
            dict(
                positions=torch.arange(4),
                inv_freq=rope_inv_freq(8)[0],
                cos=torch.ones(4, 4),
                sin=torch.ones(4, 4),
            ),
            TypeError,
            "not both",
        ),  # fmt: skip
        (dict(cos=torch.ones(4, 4), sin=torch.ones(4, 2)), ValueError, "one shape"),
        (dict(cos=torch.ones(4, 4), sin=torch.ones(4, 4), engine="turbo"), ValueError, "engine"),
        (
            dict(
                cos=torch.ones(4, 4),
                sin=torch.ones(4, 4),
                engine="reference",
                out=torch.empty(1, 4, 8),
            ),
            ValueError,
            "no out=",
        ),  # fmt: skip
        (dict(cos=torch.ones(4, 4), sin=torch.ones(4, 4), inplace=1), TypeError, "inplace"),
        (dict(cos=torch.ones(5, 4), sin=torch.ones(5, 4)), ValueError, "do not broadcast"),
        (dict(positions=torch.arange(4), inv_freq=[1.0]), TypeError, "inv_freq"),
    ],
)
def test_bad_input_names_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        apply_rope(torch.randn(1, 4, 8), **kwargs)


# ------------------------------------------------------------------ one public name


def test_apply_rope_is_the_one_public_rope_function():
    """The older names (apply_rope_qk / _cos_sin / _fast / _qk_fast / _reference,
    kernels.rotate / rotate_qk) are gone, not aliased (CHANGELOG.md)."""
    assert {n for n in dir(functional) if n.startswith("apply_rope")} == {"apply_rope"}
    assert not any(hasattr(kernels, n) for n in ("rotate", "rotate_qk"))


# --------------------------------------------------- no DeprecationWarning inside posenc

ROTARY = sorted(n for n, c in posenc.ENCODINGS.items() if c.family == "rotary")


@pytest.mark.parametrize("name", ROTARY)
def test_models_of_rotary_encodings_raise_no_deprecation_warning(name):
    """A forward and backward of every rotary encoding (and randomized over it) with
    DeprecationWarning as an error: posenc calls apply_rope, never its deprecated names."""
    assert ROTARY  # the registry has rotary encodings
    torch.manual_seed(0)
    tokens = torch.randint(0, 11, (2, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        wrapped = [("randomized", {"encoding": name})]  # randomized takes 1-D positions
        for enc, kw in [(name, {})] + wrapped * (posenc.ENCODINGS[name].position_dims == 1):
            model = posenc.TransformerLM(11, 16, 1, 2, encoding=enc, encoding_kwargs=kw)
            model(tokens).sum().backward()


def test_bench_rope_rows_raise_no_deprecation_warning():
    from posenc.bench import precision, rope

    q, k = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
    pos, inv = torch.arange(4), rope_inv_freq(8)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        want = rope.reference_qk(q, k, pos, inv)
        for got in (precision.ours_rope(q, k, pos, inv), precision.product_rope(q, k, pos, inv)):
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w, atol=1e-5, rtol=0)
