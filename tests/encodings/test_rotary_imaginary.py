"""posenc.encodings.rotary_heads: RoPE++ against golden scores derived by hand (explicit
complex arithmetic: Re and Im of sum_j q_j conj(k_j) e^{i w_j (t - s)}, the paper's eq. and
the authors' comment (q.k) sin - (q x k) cos); its real heads are posenc's rope; its
imaginary heads are relative too (hypothesis); the head layouts of each mode; bad input."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support.changed import assert_changed

import posenc
from posenc.encodings.rotary_heads import RoPEPP

PROPS = settings(max_examples=12, deadline=None)
B, H, HKV, DH = 2, 4, 2, 8


def scores(enc, q, k, qp, kp):
    rq, rk = enc.rotate(q, k, qp, kp)
    return rq @ rk.repeat_interleave(q.shape[1] // k.shape[1], 1).transpose(-1, -2)


def complex_pairs(x, layout):
    """[..., Dh] -> [..., Dh / 2] complex128: pair (a, b) as a + ib."""
    x = x.double()
    if layout == "half":
        return torch.complex(x[..., : DH // 2], x[..., DH // 2 :])
    return torch.complex(x[..., 0::2], x[..., 1::2])


def hand_scores(q, k, qp, kp, base=10000.0, layout="half"):
    """z[b, h, t, s] = sum_j q_j conj(k_j) e^{i w_j (t - s)}, w_j = base^(-2j / Dh), by an
    explicit loop over the pairs; returns (Re z, Im z) [B, H, Tq, Tk] float64."""
    qc, kc = complex_pairs(q, layout), complex_pairs(k.repeat_interleave(H // HKV, 1), layout)
    z = torch.zeros(B, H, q.shape[2], k.shape[2], dtype=torch.complex128)
    for j in range(DH // 2):
        w = base ** (-2 * j / DH)
        d = (qp.double()[:, None] - kp.double()[None, :]) * w  # [Tq, Tk]
        phase = torch.exp(1j * d.to(torch.complex128))
        z += qc[..., j, None] * kc[..., j].conj()[..., None, :] * phase
    return z.real, z.imag


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("mode", ["split", "half", "eh"])
def test_scores_are_the_real_and_imaginary_parts(mode, layout):
    """Hand-derived golden: real heads score Re z, imaginary heads Im z, which also equals
    the authors' (q.k) sin((t - s) w) - (q x k) cos((t - s) w) summed over the pairs."""
    torch.manual_seed(0)
    enc = RoPEPP(heads=H, head_dim=DH, mode=mode, layout=layout)
    q, k = torch.randn(B, H, 5, DH).double(), torch.randn(B, HKV, 7, DH).double()
    qp, kp = torch.tensor([3, 9, 10, 40, 41]), torch.arange(7) * 6
    got = scores(enc, q, k, qp, kp)
    query = q[:, 0::2].repeat_interleave(2, 1) if mode == "eh" else q  # eh: pairs share one
    re, im = hand_scores(query, k, qp, kp, layout=layout)
    imag = enc.imaginary(H, q.device)
    assert imag.sum() == H // 2
    torch.testing.assert_close(got[:, ~imag], re[:, ~imag], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[:, imag], im[:, imag], atol=1e-5, rtol=1e-5)
    # the authors' form, per pair (a = q_j, b = q_{j + Dh/2} in their rotate_half layout)
    if layout == "half":
        qc = complex_pairs(query, layout)
        kc = complex_pairs(k.repeat_interleave(H // HKV, 1), layout)
        dot = qc.real[..., :, None, :] * kc.real[..., None, :, :] + (
            qc.imag[..., :, None, :] * kc.imag[..., None, :, :]
        )  # q.k per pair [B, H, Tq, Tk, Dh/2]
        cross = qc.real[..., :, None, :] * kc.imag[..., None, :, :] - (
            qc.imag[..., :, None, :] * kc.real[..., None, :, :]
        )
        w = 10000.0 ** (-torch.arange(DH // 2, dtype=torch.float64) * 2 / DH)
        d = (qp[:, None] - kp[None, :]).double()[..., None] * w
        authors = (dot * d.sin() - cross * d.cos()).sum(-1)
        torch.testing.assert_close(got[:, imag], authors[:, imag], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["split", "half", "eh"])
def test_real_heads_are_posenc_rope(mode):
    torch.manual_seed(1)
    kwargs = dict(heads=H, head_dim=DH, base=500.0, layout="interleaved")
    enc, rope = RoPEPP(mode=mode, **kwargs), posenc.build("rope", **kwargs)
    q, k = torch.randn(B, H, 4, DH), torch.randn(B, HKV, 6, DH)
    qp, kp = torch.randint(0, 900, (B, 4)), torch.randint(0, 900, (B, 6))
    (rq, rk), (wq, wk) = enc.rotate(q, k, qp, kp), rope.rotate(q, k, qp, kp)
    real = ~enc.imaginary(H, q.device)
    torch.testing.assert_close(rk, wk)
    if mode == "eh":  # head 2h + 1 is head 2h's query, a quarter turn further
        torch.testing.assert_close(rq[:, 0::2], wq[:, 0::2])
    else:
        torch.testing.assert_close(rq[:, real], wq[:, real])
    torch.testing.assert_close(enc.angles(qp[0]), rope.angles(qp[0]))


@PROPS
@given(
    mode=st.sampled_from(["split", "half", "eh"]),
    layout=st.sampled_from(["half", "interleaved"]),
    shift=st.integers(0, 5000),
    seed=st.integers(0, 2**16),
)
def test_imaginary_heads_are_relative(mode, layout, shift, seed):
    """Shifting every position by the same amount leaves every head's score unchanged."""
    torch.manual_seed(seed)
    enc = RoPEPP(heads=H, head_dim=DH, mode=mode, layout=layout)
    q, k = torch.randn(B, H, 3, DH).double(), torch.randn(B, HKV, 5, DH).double()
    qp, kp = torch.randint(0, 100, (B, 3)), torch.randint(0, 100, (B, 5))
    base = scores(enc, q, k, qp, kp)
    torch.testing.assert_close(scores(enc, q, k, qp + shift, kp + shift), base,
                               atol=1e-9, rtol=1e-9)  # fmt: skip
    assert_changed(base, scores(enc, q, k, qp, kp + 1))  # positions do matter


def test_partial_rotary_passes_the_rest_and_backends_agree():
    torch.manual_seed(2)
    enc = RoPEPP(heads=H, head_dim=DH, rotary_dim=4)
    q, k, v = torch.randn(B, H, 6, DH), torch.randn(B, HKV, 6, DH), torch.randn(B, HKV, 6, DH)
    rq, _ = enc.rotate(q, k, torch.arange(6), torch.arange(6))
    torch.testing.assert_close(rq[..., 4:], q[..., 4:])
    out = {b: posenc.attention(q, k, v, enc, backend=b) for b in ("eager", "sdpa", "chunked")}
    for b in ("sdpa", "chunked"):
        torch.testing.assert_close(out[b], out["eager"], atol=1e-5, rtol=1e-5)


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="mode must be one of split, eh, half"):
        RoPEPP(head_dim=DH, mode="ec")
    with pytest.raises(ValueError, match="mode='eh' needs an even number of heads"):
        RoPEPP(heads=3, head_dim=DH, mode="eh")
    enc = RoPEPP(head_dim=DH, mode="eh")
    with pytest.raises(ValueError, match="even number of heads .*got 3"):
        enc.rotate(torch.randn(1, 3, 2, DH), torch.randn(1, 1, 2, DH), torch.arange(2),
                   torch.arange(2))  # fmt: skip


def test_odd_heads_split_and_half():
    """split: the odd heads imaginary (one head: RoPE's real head); half: heads H // 2 ..."""
    enc = RoPEPP(head_dim=DH)
    assert enc.imaginary(3, "cpu").tolist() == [False, True, False]
    assert RoPEPP(head_dim=DH, mode="half").imaginary(3, "cpu").tolist() == [False, True, True]
    q, pos = torch.randn(1, 1, 4, DH), torch.arange(4)
    rope = posenc.build("rope", head_dim=DH)
    for a, b in zip(enc.rotate(q, q, pos, pos), rope.rotate(q, q, pos, pos), strict=True):
        torch.testing.assert_close(a, b)
