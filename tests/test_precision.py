"""Precision at any position: float32 / bfloat16 / float16 results against float64.

Every table and rotation is within ~1e-5 of its float64 result at positions 10^3 .. 2^31 - 1
(float32), or within the rounding of the float64 result to the dtype (bfloat16, float16).
A float32 product p * w, as the seeds and most libraries compute angles, is off by up to
p * w * 2^-24 rad (0.06 at 10^6): the naive check below shows the threshold has teeth.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import functional as PF

POSITIONS = [10**3, 10**5, 10**6, 10**7, 2**24 + 1, 2**31 - 1]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
B, H, DH, D, T = 1, 2, 16, 32, 6


BITS = {torch.float32: 24, torch.bfloat16: 8, torch.float16: 11}  # significand bits


def excess(out: torch.Tensor, ref: torch.Tensor, atol: float = 1e-5) -> float:
    """How far |out - ref| goes past atol + one ulp of ref in out's dtype (<= 0: within)."""
    _, exponent = torch.frexp(ref.double())
    ulp = torch.ldexp(torch.ones_like(ref.double()), exponent - BITS[out.dtype])
    return float(((out.double() - ref.double()).abs() - atol - ulp).max())


# ------------------------------------------------------------------------- position_angles


@settings(max_examples=200, deadline=None)
@given(
    p=st.floats(-(2.0**31), 2.0**31 - 1, allow_nan=False),
    w=st.floats(1e-6, 1.0),
    integer=st.booleans(),
)
def test_position_angles_float32_match_float64_at_any_position(p, w, integer):
    pos = torch.tensor(
        [round(p) if integer else p], dtype=torch.int64 if integer else torch.float64
    )
    inv = torch.tensor([w], dtype=torch.float64)
    a32 = PF.position_angles(pos, inv)
    a64 = PF.position_angles(pos, inv, torch.float64)
    assert a32.dtype == torch.float32 and a32.abs().max() < 2 * math.pi
    assert (a32.double().cos() - a64.cos()).abs().max() <= 2e-6
    assert (a32.double().sin() - a64.sin()).abs().max() <= 2e-6


def test_naive_float32_angles_miss_the_threshold():
    """The policy matters: float32 products miss 1e-5 from ~10^3 on, by 0.05 at 10^6."""
    inv = PF.sinusoidal_inv_freq(64, dtype=torch.float64)
    for p, worse_than in ((10**3, 1e-5), (10**6, 1e-2)):
        pos = torch.arange(p, p + 64)
        naive = pos.float()[:, None] * inv.float()
        exact = pos.double()[:, None] * inv
        assert (naive.double().sin() - exact.sin()).abs().max() > worse_than
        ours = PF.position_angles(pos, inv)
        assert (ours.double().sin() - exact.sin()).abs().max() < 1e-6


def test_position_angles_compiled_equal_eager():
    pos, inv = torch.arange(2**31 - 64, 2**31), PF.rope_inv_freq(32)[0]
    compiled = torch.compile(PF.position_angles, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(pos, inv), PF.position_angles(pos, inv), rtol=0, atol=0)


def test_relative_sinusoid_float32_matches_float64_at_any_distance():
    """Transformer-XL's R at distances up to +-(2^31 - 1)."""
    d = torch.tensor([-(2**31) + 1, -(10**7), -1000, 0, 1000, 10**6, 2**24 + 1, 2**31 - 1])
    out = PF.relative_sinusoid(d, 64)
    inv = PF.sinusoidal_inv_freq(64, dtype=torch.float64)
    ang = d.double()[:, None] * inv
    assert out.dtype == torch.float32
    assert excess(out, torch.cat([ang.sin(), ang.cos()], -1)) <= 0


# ------------------------------------------------------------------------------ encodings

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
LLAMA3 = {
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 1024,
}  # fmt: skip
CASES = [
    ("sinusoidal", {}),
    ("scaled_sinusoidal", {}),
    ("sinusoidal_2d", {}),
    ("sinusoidal_3d", {}),
    ("rope", {}),
    ("rope", {"layout": "interleaved", "rotary_dim": 8}),
    ("rope", {"scaling": YARN}),
    ("rope", {"scaling": LLAMA3}),
    ("xpos", {}),
    ("rope_2d", {}),
    ("mrope", {}),
    ("mrope", {"mrope_interleaved": True, "mrope_section": [2, 3, 3]}),
    ("rope", {"scaling": {"rope_type": "proportional", "partial_rotary_factor": 0.25}}),
    ("rope_nd", {"axes": 3, "rotary_dim": 12}),
    ("pope", {"bias_init": "uniform"}),
    ("fope", {"train_len": 4096, "per_head": True}),
    ("liere", {"axes": 2, "block_dim": 4, "per_head": True}),
    ("rope_heads", {"rotate_heads": 2}),
    ("grape_m", {}),
    ("videorope", {}),
    ("hope", {}),
    ("vrope", {}),
    ("comrope", {"axes": 2, "block_dim": 4, "per_head": True}),
    ("comrope", {"axes": 3, "variant": "ld", "block_dim": 2}),
    ("rope_pp", {}),
    ("rope_pp", {"mode": "eh", "layout": "interleaved"}),
]
# Every registered encoding is either here (it computes angles; checked above or below) or
# without angles; a new encoding must be placed in one of the two.
WITH_ANGLES = {name for name, _ in CASES} | {"transformer_xl"}
WITHOUT_ANGLES = {
    "alibi", "cope", "deberta", "fire", "index", "kerple", "learned", "learned_window", "nope",
    "onehot", "phase", "randomized", "sandwich", "shaw", "t5", "nope_temperature", "fox", "dape",
    "stickbreaking", "dynamic_bias", "distance_basis", "cable", "path", "grape_a",
}  # fmt: skip


def test_every_encoding_is_classified():
    assert set(posenc.ENCODINGS) == WITH_ANGLES | WITHOUT_ANGLES
    assert not WITH_ANGLES & WITHOUT_ANGLES


def positions_near(p: int, dims: int) -> torch.Tensor:
    """T positions ending at p: [T], or [T, P] with axis a at p // (a + 1)."""
    pos = torch.arange(p - T + 1, p + 1)
    return torch.stack([pos // (a + 1) for a in range(dims)], -1) if dims > 1 else pos


def outputs(enc, pos: torch.Tensor, dtype: torch.dtype, run_in=None) -> list[torch.Tensor]:
    """The table (embed of zeros) of an absolute encoding; the rotated q and k of a rotary one.
    Inputs are float64 draws rounded to `dtype`, run in `run_in` (default: `dtype`)."""
    run_in = run_in or dtype
    if enc.family == "absolute":
        return [enc.embed(torch.zeros(B, T, D, dtype=run_in), pos)]
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(B, H, T, DH, generator=g, dtype=torch.float64) for _ in range(2))
    return list(enc.rotate(q.to(dtype).to(run_in), k.to(dtype).to(run_in), pos, pos))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("p", POSITIONS)
@pytest.mark.parametrize(
    ("name", "kwargs"), CASES, ids=[f"{n}{i}" for i, (n, _) in enumerate(CASES)]
)
def test_tables_and_rotations_match_float64(name, kwargs, p, dtype):
    enc = posenc.build(name, dim=D, heads=H, head_dim=DH, **kwargs).eval()
    pos = positions_near(p, enc.position_dims)
    with torch.no_grad():
        got = outputs(enc, pos, dtype)
        refs = outputs(copy.deepcopy(enc).double(), pos, dtype, run_in=torch.float64)
    for out, ref in zip(got, refs, strict=True):
        assert out.dtype == dtype
        assert excess(out, ref) <= 0, f"{name} at {p} in {dtype}: {excess(out, ref):.2e} over"


def test_compiled_keeps_the_precision():
    """Inductor-compiled tables and rotations at 2^31 - 1: as accurate as eager (no branch)."""
    torch._dynamo.reset()
    rope, sin = posenc.build("rope", head_dim=DH), posenc.build("sinusoidal", dim=D)
    pos = positions_near(2**31 - 1, 1)

    def fn(q, k, x):
        return (*rope.rotate(q, k, pos, pos), sin.embed(x, pos))

    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(B, H, T, DH, generator=g, dtype=torch.float64) for _ in range(2))
    x = torch.zeros(B, T, D, dtype=torch.float64)
    refs = fn(q, k, x)
    for out, ref in zip(torch.compile(fn)(q.float(), k.float(), x.float()), refs, strict=True):
        assert excess(out, ref) <= 0
