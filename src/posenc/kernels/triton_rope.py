"""RoPE on CUDA as one Triton kernel that rotates q and k in a single launch (posenc.kernels'
_rotate_qk imports it lazily; tests run it under TRITON_INTERPRET=1 on CPU). Both layouts,
partial rotary, [B, T] positions (cos / sin any broadcast view of [B, 1, T, R/2]), strided
inputs, in place and out=, autograd (backward: the inverse rotation, same kernel). cos / sin
are float32 from posenc.functional.rope_cos_sin, so the numbers equal the reference's.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from posenc.kernels.cpu_rope import views4d


@triton.jit
def _rotate_rows(
    x_ptr, o_ptr, c_ptr, s_ptr, pid, rows, d1, d2,
    xs0, xs1, xs2, os0, os1, os2, cs0, cs1, cs2, half, dh, sign,
    INTERLEAVED: tl.constexpr, COPY_REST: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_REST: tl.constexpr
):  # fmt: skip
    """Rotate BLOCK_R rows (of the flattened leading dims d0*d1*d2) of one tensor."""
    r = pid.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < rows
    i2 = r % d2
    i01 = r // d2
    i1 = i01 % d1
    i0 = i01 // d1
    xo = i0 * xs0 + i1 * xs1 + i2 * xs2
    oo = i0 * os0 + i1 * os1 + i2 * os2
    co = i0 * cs0 + i1 * cs1 + i2 * cs2
    j = tl.arange(0, BLOCK_H)
    m = rmask[:, None] & (j < half)[None, :]
    c = tl.load(c_ptr + co[:, None] + j[None, :], mask=m, other=0.0)
    s = tl.load(s_ptr + co[:, None] + j[None, :], mask=m, other=0.0) * sign
    if INTERLEAVED:
        ia = 2 * j
        ib = 2 * j + 1
    else:
        ia = j
        ib = j + half
    a = tl.load(x_ptr + xo[:, None] + ia[None, :], mask=m, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + xo[:, None] + ib[None, :], mask=m, other=0.0).to(tl.float32)
    ty = o_ptr.dtype.element_ty
    tl.store(o_ptr + oo[:, None] + ia[None, :], (a * c - b * s).to(ty), mask=m)
    tl.store(o_ptr + oo[:, None] + ib[None, :], (b * c + a * s).to(ty), mask=m)
    if COPY_REST:
        rr = 2 * half + tl.arange(0, BLOCK_REST)
        rm = rmask[:, None] & (rr < dh)[None, :]
        v = tl.load(x_ptr + xo[:, None] + rr[None, :], mask=rm, other=0.0)
        tl.store(o_ptr + oo[:, None] + rr[None, :], v, mask=rm)


@triton.jit
def _rope_qk_kernel(
    q_ptr, qo_ptr, qc_ptr, qs_ptr, q_rows, q_d1, q_d2,
    qxs0, qxs1, qxs2, qos0, qos1, qos2, qcs0, qcs1, qcs2, q_progs,
    k_ptr, ko_ptr, kc_ptr, ks_ptr, k_rows, k_d1, k_d2,
    kxs0, kxs1, kxs2, kos0, kos1, kos2, kcs0, kcs1, kcs2,
    half, dh, sign,
    INTERLEAVED: tl.constexpr, Q_COPY_REST: tl.constexpr, K_COPY_REST: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_REST: tl.constexpr
):  # fmt: skip
    """Programs [0, q_progs) rotate q, the rest rotate k: one launch for both."""
    pid = tl.program_id(0)
    if pid < q_progs:
        _rotate_rows(
            q_ptr, qo_ptr, qc_ptr, qs_ptr, pid, q_rows, q_d1, q_d2,
            qxs0, qxs1, qxs2, qos0, qos1, qos2, qcs0, qcs1, qcs2, half, dh, sign,
            INTERLEAVED, Q_COPY_REST, BLOCK_R, BLOCK_H, BLOCK_REST,
        )  # fmt: skip
    else:
        _rotate_rows(
            k_ptr, ko_ptr, kc_ptr, ks_ptr, pid - q_progs, k_rows, k_d1, k_d2,
            kxs0, kxs1, kxs2, kos0, kos1, kos2, kcs0, kcs1, kcs2, half, dh, sign,
            INTERLEAVED, K_COPY_REST, BLOCK_R, BLOCK_H, BLOCK_REST,
        )  # fmt: skip


def _prep(x, cos, sin, out):
    """4-D views and their row counts / strides for the kernel."""
    if x.stride(-1) != 1 or out.stride(-1) != 1:
        raise ValueError("triton RoPE needs the head dim contiguous (stride 1)")
    x4, o4, c4, s4 = views4d(x, cos, sin, out)
    if c4.stride() != s4.stride() or c4.stride(-1) != 1:
        c4, s4 = c4.contiguous(), s4.contiguous()
    rows = x4.shape[0] * x4.shape[1] * x4.shape[2]
    return x4, o4, c4, s4, rows


def rotate_qk_into(q, k, q_cs, k_cs, q_out, k_out, layout: str = "half", sign: float = 1.0):
    """q_out, k_out = rotate(q), rotate(k) by (cos, sin) pairs q_cs, k_cs (float32, broadcast
    to x[..., :R/2]); an out may be its input (in place). One kernel launch."""
    half, dh = q_cs[0].shape[-1], q.shape[-1]
    if k.shape[-1] != dh or k_cs[0].shape[-1] != half:
        raise ValueError("q and k must share the head dim and the rotary dim")
    q4, qo, qc, qs, q_rows = _prep(q, *q_cs, q_out)
    k4, ko, kc, ks, k_rows = _prep(k, *k_cs, k_out)
    block_h = triton.next_power_of_2(half)
    block_rest = triton.next_power_of_2(max(dh - 2 * half, 1))
    block_r = max(1, min(64, 4096 // block_h))
    q_progs = triton.cdiv(q_rows, block_r)
    grid = (q_progs + triton.cdiv(k_rows, block_r),)
    _rope_qk_kernel[grid](
        q4, qo, qc, qs, q_rows, q4.shape[1], q4.shape[2],
        *q4.stride()[:3], *qo.stride()[:3], *qc.stride()[:3], q_progs,
        k4, ko, kc, ks, k_rows, k4.shape[1], k4.shape[2],
        *k4.stride()[:3], *ko.stride()[:3], *kc.stride()[:3],
        half, dh, float(sign),
        INTERLEAVED=layout == "interleaved",
        Q_COPY_REST=(2 * half < dh) and q_out.data_ptr() != q.data_ptr(),
        K_COPY_REST=(2 * half < dh) and k_out.data_ptr() != k.data_ptr(),
        BLOCK_R=block_r, BLOCK_H=block_h, BLOCK_REST=block_rest,
    )  # fmt: skip
    return q_out, k_out


class TritonRopeQK(torch.autograd.Function):
    """Out-of-place rotation of q and k; backward rotates the gradients by -angle."""

    @staticmethod
    def forward(ctx, q, k, qc, qs, kc, ks, layout):
        oq, ok = torch.empty_like(q), torch.empty_like(k)
        rotate_qk_into(q, k, (qc, qs), (kc, ks), oq, ok, layout, 1.0)
        ctx.save_for_backward(qc, qs, kc, ks)
        ctx.layout = layout
        return oq, ok

    @staticmethod
    def backward(ctx, gq, gk):
        qc, qs, kc, ks = ctx.saved_tensors
        gq, gk = gq.contiguous(), gk.contiguous()
        dq, dk = torch.empty_like(gq), torch.empty_like(gk)
        rotate_qk_into(gq, gk, (qc, qs), (kc, ks), dq, dk, ctx.layout, -1.0)
        return dq, dk, None, None, None, None, None


def rope_qk(q, k, q_cs, k_cs, layout: str = "half", inplace: bool = False, out=None):
    """Rotate q [B, H, Tq, Dh] and k [B, Hkv, Tk, Dh] by q_cs = (cos, sin), k_cs; differentiable
    when neither inplace nor out= is used."""
    if inplace:
        return rotate_qk_into(q, k, q_cs, k_cs, q, k, layout)
    if out is not None:
        return rotate_qk_into(q, k, q_cs, k_cs, out[0], out[1], layout)
    return TritonRopeQK.apply(q, k, *q_cs, *k_cs, layout)
