"""The Triton RoPE kernel equals posenc.functional's reference, run in Triton's CPU
interpreter (TRITON_INTERPRET=1) on CPU tensors: values (float32 <= 1e-5; bfloat16 <= one bf16
ulp at |x| <= 8), both layouts, partial rotary, [B, T] positions, strided [B, T, H, Dh] views,
in place / out= / out-of-place, and gradients. On a GPU the same kernel runs compiled."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton decorates the kernels

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("triton")
from posenc.functional import rope_align, rope_cos_sin, rope_inv_freq  # noqa: E402
from posenc.functional.rotary import _rope_reference  # noqa: E402
from posenc.kernels import triton_rope  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("no GPU and TRITON_INTERPRET is off", allow_module_level=True)


def apply_rope(x, pos, inv, layout):
    """posenc.functional's pure-PyTorch reference (apply_rope itself may take a fast path)."""
    return _rope_reference(x, *cos_sin(pos, inv, x), layout, False)


def cos_sin(pos, inv, x):
    c, s = rope_cos_sin(pos, inv, 1.0, x.dtype)
    return rope_align(c, x, "p"), rope_align(s, x, "p")


CASES = [
    # B, H, Hkv, Tq, Tk, Dh, R, layout, batch positions, [B, T, H, Dh] view, dtype
    (2, 4, 2, 5, 7, 16, 16, "half", False, False, torch.float32),
    (2, 4, 4, 6, 6, 16, 16, "interleaved", True, False, torch.float32),
    (1, 3, 1, 4, 9, 20, 12, "half", True, True, torch.float32),
    (2, 2, 2, 3, 3, 10, 6, "interleaved", False, True, torch.float32),
    (2, 4, 2, 5, 5, 16, 8, "half", True, False, torch.bfloat16),
    (1, 2, 2, 4, 4, 12, 12, "interleaved", True, True, torch.bfloat16),
]


def make(B, H, Hkv, Tq, Tk, Dh, R, batch_pos, bthd, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)

    def t(heads, T):
        x = torch.randn(B, T, heads, Dh, generator=g).to(dtype).transpose(1, 2)
        return (x if bthd else x.contiguous()).to(DEVICE)

    q, k = t(H, Tq), t(Hkv, Tk)
    kp = torch.randint(0, 3000, (B, Tk) if batch_pos else (Tk,), generator=g)
    qp = kp[..., -Tq:]
    inv, _ = rope_inv_freq(R)
    return q, k, qp.to(DEVICE), kp.to(DEVICE), inv.to(DEVICE)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[7]}-R{c[6]}of{c[5]}-{c[10]}")
def test_values_equal_reference(case):
    B, H, Hkv, Tq, Tk, Dh, R, layout, batch_pos, bthd, dtype = case
    q, k, qp, kp, inv = make(B, H, Hkv, Tq, Tk, Dh, R, batch_pos, bthd, dtype)
    want_q, want_k = apply_rope(q, qp, inv, layout), apply_rope(k, kp, inv, layout)
    atol = 1e-5 if dtype == torch.float32 else 2**-7 * 8
    q0, k0 = q.clone(), k.clone()
    qcs, kcs = cos_sin(qp, inv, q), cos_sin(kp, inv, k)
    got_q, got_k = triton_rope.rope_qk(q, k, qcs, kcs, layout)
    for got, want in ((got_q, want_q), (got_k, want_k)):
        torch.testing.assert_close(got.float(), want.float(), atol=atol, rtol=0)
    assert torch.equal(q, q0) and torch.equal(k, k0), "out-of-place changed its inputs"
    oq, ok = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    triton_rope.rope_qk(q, k, qcs, kcs, layout, out=(oq, ok))
    torch.testing.assert_close(oq.float(), want_q.float(), atol=atol, rtol=0)
    torch.testing.assert_close(ok.float(), want_k.float(), atol=atol, rtol=0)
    triton_rope.rope_qk(q, k, qcs, kcs, layout, inplace=True)
    torch.testing.assert_close(q.float(), want_q.float(), atol=atol, rtol=0)
    torch.testing.assert_close(k.float(), want_k.float(), atol=atol, rtol=0)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_gradients_equal_reference(layout):
    q, k, qp, kp, inv = make(2, 4, 2, 5, 6, 16, 12, True, True, torch.float32, seed=3)
    q.requires_grad_()
    k.requires_grad_()
    gq, gk = torch.randn_like(q), torch.randn_like(k)
    want = torch.autograd.grad(
        [apply_rope(q, qp, inv, layout), apply_rope(k, kp, inv, layout)], [q, k], [gq, gk]
    )
    outs = triton_rope.rope_qk(q, k, cos_sin(qp, inv, q), cos_sin(kp, inv, k), layout)
    got = torch.autograd.grad(list(outs), [q, k], [gq, gk])
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=0)
