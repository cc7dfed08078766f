"""posenc.encodings.rotary_polar: PoPE against x-transformers' PolarEmbedding as its Attention
applies it; scores depend only on the offset; magnitudes only on content; backends."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc

PROPS = settings(max_examples=20, deadline=None)
B, H, DH = 2, 4, 8


def reference_attention(q, k, v, learned_bias):
    """x-transformers: freqs, bias = PolarEmbedding(pos); q, k = apply_polar_pos_emb(q, freqs),
    apply_polar_pos_emb(k, freqs + bias); causal softmax(q.k / sqrt(Dh)) @ v (queries last)."""
    from x_transformers.x_transformers import PolarEmbedding, apply_polar_pos_emb

    pe = PolarEmbedding(DH, H)
    with torch.no_grad():
        pe.learned_bias.copy_(learned_bias)
    Tq, Tk = q.shape[2], k.shape[2]
    freqs, bias = pe(torch.arange(Tk))
    rq, rk = apply_polar_pos_emb(q, freqs), apply_polar_pos_emb(k, freqs + bias)
    logits = rq @ rk.transpose(-1, -2) * DH**-0.5
    causal = torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq)
    return torch.softmax(logits.masked_fill(~causal, -torch.inf), -1) @ v


@pytest.mark.parametrize(("Tq", "Tk"), [(7, 7), (3, 9)])
def test_matches_x_transformers(Tq, Tk):
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, t, DH) for t in (Tq, Tk, Tk))
    learned_bias = torch.randn(H, 1, DH) * 4 - 3  # some outside [-2 pi, 0]: clamped
    enc = posenc.build("pope", dim=H * DH, heads=H)
    with torch.no_grad():
        enc.phase.copy_(learned_bias)
    ref = reference_attention(q, k, v, learned_bias)
    for backend in ("eager", "sdpa", "chunked"):
        out = posenc.attention(q, k, v, enc, backend=backend)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    # grouped keys: the phase sits on the queries, so two kv heads need no per-head copy
    kg, vg = k[:, ::2], v[:, ::2]
    ref = reference_attention(
        q, kg.repeat_interleave(2, 1), vg.repeat_interleave(2, 1), learned_bias
    )
    torch.testing.assert_close(posenc.attention(q, kg, vg, enc), ref, atol=1e-5, rtol=1e-5)


def test_flex_agrees_with_eager():
    """q and k are 2 Dh wide, v Dh: FlexAttention takes the two widths (forward only on CPU)."""
    torch.manual_seed(0)
    enc = posenc.build("pope", head_dim=16, heads=2, bias_init="uniform")
    q, k, v = torch.randn(1, 2, 16, 16), torch.randn(1, 2, 16, 16), torch.randn(1, 2, 16, 16)
    with torch.no_grad():
        ref = posenc.attention(q, k, v, enc, backend="eager")
        torch.testing.assert_close(posenc.attention(q, k, v, enc, backend="flex"), ref,
                                   atol=1e-5, rtol=1e-5)  # fmt: skip


@PROPS
@given(
    shift=st.integers(0, 10**7),
    seed=st.integers(0, 2**16),
    batched=st.booleans(),
)
def test_scores_depend_only_on_the_offset(shift, seed, batched):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    enc = posenc.build("pope", head_dim=DH, heads=H, bias_init="uniform")
    q, k = torch.randn(B, H, 4, DH, generator=g), torch.randn(B, 2, 6, DH, generator=g)
    shape = (B, 6) if batched else (6,)
    kp = torch.randint(0, 1000, shape, generator=g)
    qp = kp[..., 2:]
    rq, rk = enc.rotate(q, k, qp, kp)
    sq, sk = enc.rotate(q, k, qp + shift, kp + shift)
    rk, sk = rk.repeat_interleave(2, 1), sk.repeat_interleave(2, 1)
    a, b = rq @ rk.transpose(-1, -2), sq @ sk.transpose(-1, -2)
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@PROPS
@given(p=st.integers(0, 2**31 - 1), seed=st.integers(0, 2**16))
def test_magnitudes_come_from_content_alone(p, seed):
    """|(q'_c, q'_(c + Dh))| = softplus(q_c) at every position: position only turns."""
    g = torch.Generator().manual_seed(seed)
    enc = posenc.build("pope", head_dim=DH, heads=H, bias_init="uniform")
    q = torch.randn(1, H, 3, DH, generator=g)
    rq, rk = enc.rotate(q, q, torch.tensor([0, p // 2, p]), torch.tensor([p, 0, 1]))
    for r in (rq, rk):
        assert r.shape == (1, H, 3, 2 * DH)
        torch.testing.assert_close(r[..., :DH].hypot(r[..., DH:]), F.softplus(q))


def test_phase_is_learned_and_clamped():
    torch.manual_seed(0)
    enc = posenc.build("pope", head_dim=DH, heads=H, bias_init="uniform")
    assert enc.trainable and enc.phase.shape == (H, 1, DH)
    assert float(enc.phase.detach().min()) >= -2 * math.pi and float(enc.phase.detach().max()) <= 0
    assert float(posenc.build("pope", head_dim=DH, heads=H).phase.abs().max()) == 0.0
    q, k, v = (torch.randn(1, H, 5, DH) for _ in range(3))
    posenc.attention(q, k, v, enc, backend="chunked").sum().backward()
    assert enc.phase.grad is not None and float(enc.phase.grad.abs().sum()) > 0
    assert enc.softmax_scale(DH) == DH**-0.5


def test_angles_are_one_per_channel():
    enc = posenc.build("pope", head_dim=DH, base=100.0)
    a = enc.angles(torch.arange(3))
    w = torch.tensor([100.0 ** (-c / DH) for c in range(DH)], dtype=torch.float64)
    torch.testing.assert_close(a, torch.arange(3, dtype=torch.float64)[:, None] * w, rtol=1e-6,
                               atol=1e-7)  # fmt: skip
    torch.testing.assert_close(enc.to(torch.bfloat16).angles(torch.arange(3)), a)  # not rounded


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"head_dim": None}, "head dim"),
        ({"base": 1.0}, "base"),
        ({"bias_init": "normal"}, "bias_init"),
        ({"head_dim": 0}, "head_dim"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, word):
    with pytest.raises((ValueError, TypeError), match=word):
        posenc.build("pope", **{"head_dim": DH, **kwargs})


def test_wrong_head_dim_or_heads_are_refused():
    enc = posenc.build("pope", head_dim=DH, heads=H)
    pos = torch.arange(3)
    with pytest.raises(ValueError, match="head_dim=8"):
        enc.rotate(torch.randn(1, H, 3, 4), torch.randn(1, H, 3, 4), pos, pos)
    with pytest.raises(ValueError, match="heads=4"):
        enc.rotate(torch.randn(1, 3, 3, DH), torch.randn(1, 3, 3, DH), pos, pos)
