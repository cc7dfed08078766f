"""posenc.encodings.rotary_fourier: FoPE against golden values worked out from the paper's
equations (the authors' FourierEmbedding, as vLLM serves it); RoPE as its special case; the
floor, the position-free pairs, per-head coefficients, learning, backends, bad input."""

import math

import pytest
import torch

import posenc
from posenc.encodings.rotary_fourier import FoPE

B, H, DH = 2, 2, 8


def golden(q, t, w, a, b, M):
    """FoPE of one head vector q [Dh] at position t, by hand (half layout, R = Dh):
    C_d = sum_k a[k][d] cos(w_k t), S_d = sum_k b[k][d] sin(w_k t) for d < M, else 1;
    (q_d, q_(d + R/2)) -> (q_d C_d - q_(d + R/2) S_d, q_(d + R/2) C_d + q_d S_d)."""
    half = len(q) // 2
    out = [0.0] * len(q)
    for d in range(half):
        C = sum(a[k][d] * math.cos(w[k] * t) for k in range(len(w))) if d < M else 1.0
        S = sum(b[k][d] * math.sin(w[k] * t) for k in range(len(w))) if d < M else 1.0
        x, y = q[d], q[d + half]
        out[d], out[d + half] = x * C - y * S, y * C + x * S
    return out


def test_golden_values_from_the_equations():
    # base 16, R = 8: w = 1, 1/2, 1/4, 1/8; train_len 32 zeroes w < 2 pi / 32 = 0.196: K = 3
    enc = FoPE(head_dim=DH, heads=H, base=16.0, train_len=32)
    w = [1.0, 0.5, 0.25]
    assert enc.inv_freq.tolist() == w and enc.cos_coef.shape == (3, 2)  # M = min(K, Dh / 4)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        enc.cos_coef.copy_(torch.randn(3, 2, generator=g))
        enc.sin_coef.copy_(torch.randn(3, 2, generator=g))
    a, b = enc.cos_coef.tolist(), enc.sin_coef.tolist()
    q = torch.randn(1, 1, 4, DH, generator=g)
    pos = torch.tensor([0, 3, 17, 1000])
    rq, _ = enc.rotate(q, q, pos, pos)
    want = [golden(q[0, 0, i].tolist(), int(pos[i]), w, a, b, 2) for i in range(4)]
    torch.testing.assert_close(rq[0, 0], torch.tensor(want), atol=1e-5, rtol=1e-5)


def test_identity_coefficients_and_no_floor_are_rope():
    """eye init without noise, every frequency kept, every pair a series: RoPE itself."""
    torch.manual_seed(0)
    enc = FoPE(head_dim=DH, train_len=10**4, pairs=DH // 2, init_gain=0.0)
    rope = posenc.build("rope", head_dim=DH)
    q, k = torch.randn(B, 4, 5, DH), torch.randn(B, 2, 7, DH)
    qp, kp = torch.randint(0, 5000, (B, 5)), torch.randint(0, 5000, (B, 7))
    for a, b in zip(enc.rotate(q, k, qp, kp), rope.rotate(q, k, qp, kp), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("train_len", [16, 100, 1000, 10**5])
def test_the_floor_keeps_exactly_the_frequencies_that_turn_within_train_len(train_len):
    enc = FoPE(head_dim=32, train_len=train_len)
    w = posenc.functional.rope_inv_freq(32)[0]
    kept = w[w.double() >= 2 * math.pi / train_len]
    assert torch.equal(enc.inv_freq, kept)
    assert (2 * math.pi / enc.inv_freq.double() <= train_len).all()  # period within the length
    assert enc.cos_coef.shape == (len(kept), min(len(kept), 8))


def test_pairs_past_the_series_carry_no_position():
    torch.manual_seed(0)
    enc = FoPE(head_dim=16, train_len=64)  # K = 3 kept frequencies, M = 3 series pairs of 8
    M = enc.cos_coef.shape[-1]
    q = torch.randn(1, 1, 1, 16).expand(1, 1, 6, 16)
    rq, _ = enc.rotate(q, q, torch.arange(6) * 37, torch.arange(6))
    free = torch.cat([rq[..., M:8], rq[..., 8 + M :]], -1)  # pairs M..7, both halves
    assert torch.equal(free, free[:, :, :1].expand_as(free))  # the same at every position
    assert not torch.allclose(rq[..., :M], rq[:, :, :1, :M].expand_as(rq[..., :M]))


def test_initial_coefficients_are_a_strided_identity_plus_xavier_noise():
    enc = FoPE(head_dim=16, train_len=10**4, pairs=3, init_gain=0.0)
    K = enc.inv_freq.numel()  # 7: 10000^(-14/16) has a period > 10^4
    step = math.ceil(K / 3)
    want = torch.zeros(K, 3)
    for d in range(3):
        want[d * step, d] = 1.0
    assert torch.equal(enc.cos_coef.detach(), want) and torch.equal(enc.sin_coef.detach(), want)
    torch.manual_seed(0)
    big = FoPE(head_dim=512, train_len=10**6, pairs=128, init_gain=0.3)  # K = 256, M = 128
    noise = big.cos_coef.detach() - (big.cos_coef.detach() > 0.5).float()
    assert noise.std().item() == pytest.approx(0.3 * math.sqrt(2 / (256 + 128)), rel=0.1)


def test_per_head_coefficients_act_on_their_own_head():
    torch.manual_seed(0)
    enc = FoPE(head_dim=DH, heads=H, train_len=64, per_head=True)
    assert enc.cos_coef.shape[0] == H
    q, k = torch.randn(B, H, 4, DH), torch.randn(B, H, 4, DH)
    pos = torch.randint(0, 60, (B, 4))
    rq, rk = enc.rotate(q, k, pos, pos)
    for h in range(H):
        one = FoPE(head_dim=DH, train_len=64)
        with torch.no_grad():
            one.cos_coef.copy_(enc.cos_coef[h])
            one.sin_coef.copy_(enc.sin_coef[h])
        hq, hk = one.rotate(q[:, h : h + 1], k[:, h : h + 1], pos, pos)
        torch.testing.assert_close(rq[:, h : h + 1], hq)
        torch.testing.assert_close(rk[:, h : h + 1], hk)
    with pytest.raises(ValueError, match="per_head=True"):
        enc.rotate(q, k[:, :1], pos, pos)


@pytest.mark.parametrize("per_head", [False, True])
def test_backends_agree_and_coefficients_learn(per_head):
    torch.manual_seed(0)
    enc = posenc.build("fope", dim=4 * DH, heads=4, head_dim=DH, train_len=64, per_head=per_head)
    kv = 4 if per_head else 2
    q, k, v = torch.randn(B, 4, 6, DH), torch.randn(B, kv, 6, DH), torch.randn(B, kv, 6, DH)
    pos = torch.randint(0, 64, (B, 6)).sort(-1).values
    ref = posenc.attention(q, k, v, enc, pos, pos, backend="eager")
    for backend in ("sdpa", "chunked", "auto"):
        out = posenc.attention(q, k, v, enc, pos, pos, backend=backend)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    ref.sum().backward()
    assert enc.cos_coef.grad.abs().sum() > 0 and enc.sin_coef.grad.abs().sum() > 0
    fixed = posenc.build("fope", head_dim=DH, learnable=False)
    assert not fixed.trainable and not fixed.cos_coef.requires_grad


def test_a_train_len_shorter_than_every_period_leaves_no_position():
    enc = FoPE(head_dim=DH, train_len=4)  # 2 pi / 4 > 1 = the fastest frequency
    assert enc.inv_freq.numel() == 0
    q = torch.randn(1, 1, 1, DH).expand(1, 1, 3, DH)
    rq, _ = enc.rotate(q, q, torch.tensor([0, 5, 9]), torch.arange(3))
    assert torch.allclose(rq, rq[:, :, :1].expand_as(rq))


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"head_dim": None}, "head dim"),
        ({"pairs": 0}, "pairs"),
        ({"pairs": 4}, "pairs"),  # K = 2 at head_dim 8, train_len 64
        ({"per_head": True, "heads": None}, "heads"),
        ({"per_head": 1}, "per_head"),
        ({"learnable": "yes"}, "learnable"),
        ({"init_gain": -1.0}, "init_gain"),
        ({"train_len": 0}, "train_len"),
        ({"base": 0.5}, "base"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, word):
    with pytest.raises((ValueError, TypeError), match=word):
        posenc.build("fope", **{"head_dim": DH, "heads": H, "max_len": 64, **kwargs})
