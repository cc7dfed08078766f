"""The `distance` backend of posenc.attention: a bias of the distance alone at the speed of
plain flash attention, on CPU, in O(Tq + Tk) extra memory.

A bias of (head, q_pos - k_pos) alone (encoding.distance_bias: ALiBi, T5, KERPLE, Sandwich,
FIRE below its threshold) takes Tq + Tk - 1 values per head, vec [H, L]. With consecutive
integer positions and the keys reversed (j' = Tk - 1 - j) the distance is i + j' + const, so
the [H, Tq, Tk] bias is a strided view of vec (strides L, 1, 1: a Hankel matrix), the causal
mask folded in (finfo.min at negative distances). torch's CPU flash kernel reads it as its
attn_mask, one call per block of QUERY_BLOCK rows over the keys up to the block's last query.

Backward (_tiled_backward): per tile the matmuls of flash's backward and one pass of the C
kernel posenc.kernels.cpu_bias, which makes P and dS = P * (dP - rowsum(dO * O)) without
subnormals and sums dvec along anti-diagonals. torch's own CPU flash backward, given a bias
spanning more than ~87 nats (ALiBi's steep heads at long T), computes with subnormal
probabilities (fwd+bwd 4.2-4.3x SDPA without a bias at T = 2048 and 8192 on x86 without
flush-to-zero; this pass 1.22-1.37x: docs/bench/bias-score.txt, bias-41.txt).

FIRE (`mlp_form`) where plan() refuses it: fire_plan / _FireBias, its MLP evaluated per block
of rows by a C kernel, read by the same flash kernel as a dense [H, rows, keys] attn_mask.
plan() and fire_plan() say why a call cannot take this path (then `auto` falls back).
"""

from __future__ import annotations

import os

import torch
from torch.autograd.function import once_differentiable

from posenc.attention.call import Backend
from posenc.attention.eager import repeat_kv
from posenc.kernels import cpu_bias

ENV_VAR = "POSENC_DISTANCE_BIAS"  # "0": never take the distance backend
# query rows per flash call (causal): None = Tk // 16 within 256..1024 (a long block runs the
# kernel's 256-row tiles, >= 768 rows; a short one wastes less above the diagonal)
QUERY_BLOCK: int | None = None
GRAD_TILE = (256, 256)  # (rows, keys) of a backward tile, FIRE's too (chosen by hand-timed
# shapes on the quiet 2-core CPU; recorded result: docs/bench/bias-41.txt)
_FWD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
MASKED = torch.finfo(torch.float32).min


def _arange_start(pos: torch.Tensor) -> torch.Tensor | None:
    """pos[..., 0] ([] or [b]) where pos [T] / [b, T] counts up by 1 from it, else None."""
    if pos.is_floating_point() or pos.dim() not in (1, 2):
        return None
    step = torch.arange(pos.shape[-1], device=pos.device)
    return pos[..., 0] if bool((pos - pos[..., :1] == step).all()) else None


def _refused(q) -> str:
    """Why neither fast path runs here (either backend's), or ""."""
    if os.environ.get(ENV_VAR, "1") == "0":
        return f"{ENV_VAR}=0"
    if q.device.type != "cpu":
        return "it runs on CPU only (torch's CPU flash kernel)"
    return "not under torch.compile" if torch.compiler.is_compiling() else ""


def plan(enc, q, k, q_pos, k_pos, causal: bool, mask, default_pos: bool):
    """([(batch rows or None: all, delta, vec [H, L])], "") when this call can take the
    distance backend, else (None, why). delta = q_pos[0] - k_pos[0]; vec[:, m] is the bias at
    distance delta - (Tk - 1) + m, float32 after q's dtype's rounding, masked where causal."""
    if enc is None:
        return None, "no encoding: no bias"
    name = type(enc).__name__
    if "distance" not in enc.provides:
        what = ", ".join(sorted(enc.provides)) or "nothing"
        return None, f"{name} has no bias of the distance alone (it provides {what})"
    if enc.score_hooks:
        return None, f"{name}'s {enc.score_hooks[0]}() hook needs the logits in hand"
    if enc.position_dims != 1:
        return None, f"{name} takes {enc.position_dims}-D positions"
    if why := _refused(q):
        return None, why
    if mask is not None:
        return None, "a mask is given"
    Tq, Tk = q.shape[2], k.shape[2]
    if default_pos:
        deltas = [Tk - Tq]
    else:
        qa, ka = _arange_start(q_pos), _arange_start(k_pos)
        if qa is None or ka is None:
            return None, "positions are not consecutive integers"
        deltas = (qa - ka).reshape(-1).tolist()
    groups = [(None, deltas[0])]
    if len(set(deltas)) > 1:  # offsets differ per batch row: one call per row
        groups = [(slice(b, b + 1), delta) for b, delta in enumerate(deltas)]
    out = []
    for rows, delta in groups:
        d = torch.arange(delta - Tk + 1, delta + Tq, device=q.device)  # [L] distances
        vec = enc.distance_bias(d, q_pos)
        if vec is None:
            return None, f"{name}'s bias is not a function of the distance alone here"
        if torch.is_grad_enabled() and cpu_bias.kernel() is None:
            return None, f"no C kernel for the backward ({cpu_bias.BROKEN})"
        vec = vec.float()
        if q.dtype != torch.float32:  # rounded as bias() rounds to q's dtype; the gradient not
            vec = vec + (vec.to(q.dtype).float() - vec).detach()
        if causal:
            vec = vec.masked_fill(d < 0, MASKED)
        out.append((rows, delta, vec.contiguous()))
    return out, ""


class Distance(Backend):
    """The backend, taken wherever it runs: can_run keeps plan()'s groups in the call's memo."""

    def can_run(self, call) -> str | None:
        args = (call.q, call.k, call.q_pos, call.k_pos, call.causal, call.mask, call.default_pos)
        groups, why = plan(call.encoding, *args)
        call.memo["distance"] = groups
        if groups is None and hasattr(call.encoding, "mlp_form"):  # FIRE: its MLP per block
            groups, why = fire_plan(call.encoding, *args[:-1])
            call.memo["fire"] = groups
        if groups is None:
            return f"backend='distance' cannot run this call: {why}; use 'auto'"
        return None

    def run(self, call) -> torch.Tensor:
        if "distance" not in call.memo and (why := self.can_run(call)) is not None:
            raise ValueError(why)
        q, H, causal, scale = call.q, call.q.shape[1], call.causal, call.scale
        qf, kf, vf = q.float(), repeat_kv(call.k, H).float(), repeat_kv(call.v, H).float()
        if call.memo.get("fire") is not None:  # the groups fire_plan made
            outs = []
            for rows, qp, kp, mask in call.memo["fire"]:
                span = int(max(qp.max() - kp.min(), kp.max() - qp.min(), 0))
                psi, den, (z, A, B) = call.encoding.mlp_form(qp, span)
                outs.append(_FireBias.apply(
                    *_rows(rows, qf, kf, vf), psi.float(), den.float(), z, A, B,
                    qp.contiguous(), kp.contiguous(), mask, causal, scale, q.dtype,
                ))  # fmt: skip
        else:  # plan()'s, the keys in reverse order
            kr, vr = kf.flip(2), vf.flip(2)
            outs = [
                _DistanceBias.apply(*_rows(rows, qf, kr, vr), vec, delta, causal, scale)
                for rows, delta, vec in call.memo["distance"]
            ]
        return (outs[0] if len(outs) == 1 else torch.cat(outs)).to(q.dtype)


def _rows(rows: slice | None, *tensors) -> tuple:
    """The batch rows `rows` of each tensor (None: all of them)."""
    return tensors if rows is None else tuple(t[rows] for t in tensors)


def _blocks(Tq: int, Tk: int, delta: int, causal: bool) -> list[tuple[int, int, int]]:
    """(i0, i1, s): query rows i0:i1 read the reversed keys s:Tk (those at or before the
    block's last query when causal). Rows before the first key (delta + i < 0) are left out."""
    if not causal:
        return [(0, Tq, 0)]
    first = min(max(-delta, 0), Tq)
    rows = QUERY_BLOCK or min(1024, max(256, Tk // 16))
    out = []
    for i0 in range(first, Tq, rows):
        i1 = min(i0 + rows, Tq)
        out.append((i0, i1, min(max(Tk - delta - i1, 0), Tk)))
    return out


def _view(vec: torch.Tensor, i0: int, i1: int, s: int, Tk: int) -> torch.Tensor:
    """The bias of rows i0:i1 and reversed keys s:Tk, [1, H, i1 - i0, Tk - s]: a view of vec."""
    H, L = vec.shape
    return vec.as_strided((1, H, i1 - i0, Tk - s), (0, L, 1, 1), vec.storage_offset() + i0 + s)


class _DistanceBias(torch.autograd.Function):
    """q [B, H, Tq, Dh], reversed kr / vr [B, H, Tk, Dh] float32, vec [H, L] -> out float32."""

    @staticmethod
    def forward(ctx, q, kr, vr, vec, delta, causal, scale):
        B, H, Tq, Dh = q.shape
        Tk = kr.shape[2]
        blocks = _blocks(Tq, Tk, delta, causal)
        if blocks == [(0, Tq, 0)]:  # one call over everything: its results as they are
            out, lse = _FWD(q, kr, vr, 0.0, False, attn_mask=_view(vec, 0, Tq, 0, Tk), scale=scale)
            lse = lse.contiguous()  # [B, H, Tq]
        else:
            out, lse = q.new_zeros(B, H, Tq, Dh), q.new_zeros(B, H, Tq)  # rows with no key: 0
            for i0, i1, s in blocks:
                o, l = _FWD(
                    q[:, :, i0:i1], kr[:, :, s:], vr[:, :, s:], 0.0, False,
                    attn_mask=_view(vec, i0, i1, s, Tk), scale=scale,
                )  # fmt: skip
                out[:, :, i0:i1] = o
                lse[:, :, i0:i1] = l
        ctx.save_for_backward(q, kr, vr, vec, out, lse)
        ctx.blocks, ctx.scale, ctx.delta, ctx.causal = blocks, scale, delta, causal
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        return (*_tiled_backward(*ctx.saved_tensors, dout, ctx), None, None, None)


def _tiled_backward(q, kr, vr, vec, out, lse, dout, ctx):
    """dq, dk, dv and dvec [H, L]: the C kernel adds dS along the anti-diagonals i + j' = m."""
    Tk = kr.shape[2]
    acc = torch.zeros(vec.shape, dtype=torch.float64) if ctx.needs_input_grad[3] else None

    def keys(block, r1):  # causal: from the first key at or before the tile's last query
        return (max(block[2], Tk - ctx.delta - r1) if ctx.causal else block[2]), Tk

    def bias_grad(P, dS, lse_t, D_t, r0, r1, t0, t1):
        cpu_bias.bias_grad(P, dS, vec, lse_t, D_t, acc, r0 + t0, ctx.scale, write=True)

    grads = _tiled_grads(q, kr, vr, out, lse, dout, ctx.scale, _tiles(ctx.blocks, keys), bias_grad)
    return *grads, None if acc is None else acc.to(vec.dtype)


def _tiles(blocks, keys):
    """(r0, r1, t0, t1): GRAD_TILE tiles of each block's rows (i0, i1, ...) over the keys
    keys(block, r1) = (first, end)."""
    rows, width = GRAD_TILE
    for block in blocks:
        for r0 in range(block[0], block[1], rows):
            r1 = min(r0 + rows, block[1])
            first, end = keys(block, r1)
            for t0 in range(first, end, width):
                yield r0, r1, t0, min(t0 + width, end)


def _tiled_grads(q, k, v, out, lse, dout, scale: float, tiles, bias_grad) -> tuple:
    """dq, dk, dv of flash attention's backward, tile by tile: S = q·kᵀ and dP = dO·vᵀ by
    matmul; bias_grad(P, dS [B, H, r, t], lse, D, r0, r1, t0, t1) turns them into P and dS in
    place (the C kernel, and the bias's gradient); then dv += Pᵀ·dO, dq += dS·(scale k),
    dk += dSᵀ·(scale q) (bmm then add: baddbmm_ into a slice runs a matmul per batch row)."""
    B, H, Tq, Dh = q.shape
    D = (dout * out).sum(-1)  # [B, H, Tq]: rowsum(dO * O)
    grads = tuple(torch.zeros(t.shape) for t in (q, k, v))  # contiguous
    q3, do3, k3, v3, dq3, dk3, dv3 = (t.reshape(B * H, -1, Dh) for t in (q, dout, k, v, *grads))
    qs3, ks3 = q3 * scale, k3 * scale
    for r0, r1, t0, t1 in tiles:
        P = torch.bmm(q3[:, r0:r1], k3[:, t0:t1].transpose(1, 2))  # [B*H, r, t]: S, then P
        dS = torch.bmm(do3[:, r0:r1], v3[:, t0:t1].transpose(1, 2))  # dP, then dS
        tile = (B, H, r1 - r0, t1 - t0)
        bias_grad(P.view(tile), dS.view(tile), lse[:, :, r0:r1], D[:, :, r0:r1], r0, r1, t0, t1)
        dv3[:, t0:t1] += torch.bmm(P.transpose(1, 2), do3[:, r0:r1])
        dq3[:, r0:r1] += torch.bmm(dS, ks3[:, t0:t1])
        dk3[:, t0:t1] += torch.bmm(dS.transpose(1, 2), qs3[:, r0:r1])
    return grads


# ---------------------------------------------------------------------------- FIRE
# FIRE's bias MLP_h(psi(|i - j|) / den(i)) depends on the query position itself past its
# threshold (den = psi(max(i, L))), so it has no distance vector there. Its fast path fills the
# bias of one block of rows at a time with the C kernel (cpu_bias.fire_bias: the MLP per pair,
# _value's float32 operations) and hands it to the CPU flash kernel as that block's attn_mask;
# the backward recomputes it per tile, and cpu_bias.fire_grad reduces the tile's bias gradient
# to psi, den and the MLP's weights (autograd takes them on to c, L and the Linear layers).
# Any integer positions (packed documents, decoding), causal or not, with or without a mask.
FIRE_BLOCK_ELEMENTS = 2**24  # a forward block's bias [H, rows, keys]: at most this many (64 MiB),
# in blocks of at most 256 query rows (quiet 2-core CPU, T = 2048: past the threshold 1.66x SDPA
# without a bias at 256 rows, 2.20x at 512; T = 8192: 1.89x at 256, 2.09x at 128)


def fire_plan(enc, q, k, q_pos, k_pos, causal: bool, mask):
    """([(batch rows or None: all, qp [Tq], kp [Tk], mask [1 or H, Tq, Tk] or None)], "") where
    FIRE's fast path runs this call, else (None, why)."""
    if not hasattr(enc, "mlp_form") or enc.score_hooks or enc.position_dims != 1:
        return None, f"{type(enc).__name__} has no MLP form"
    if why := _refused(q):
        return None, why
    if q_pos.is_floating_point() or k_pos.is_floating_point():
        return None, "positions are not integers"
    if cpu_bias.kernel() is None:
        return None, f"no C kernel for FIRE's bias ({cpu_bias.BROKEN})"
    m = None if mask is None else mask.expand(*mask.shape[:2], q.shape[2], k.shape[2])

    def row(t, b):  # batch row b of [T] / [B or 1, ...] (a 1 broadcasts)
        return t if t.dim() == 1 else t[b if t.shape[0] > 1 else 0]

    if all(t is None or t.dim() == 1 or t.shape[0] == 1 for t in (q_pos, k_pos, m)):
        return [(None, row(q_pos, 0), row(k_pos, 0), None if m is None else m[0])], ""
    groups = [
        (slice(b, b + 1), row(q_pos, b), row(k_pos, b), None if m is None else row(m, b))
        for b in range(q.shape[0])
    ]
    return groups, ""


def _fire_blocks(qp, kp, causal: bool, H: int) -> list[tuple[int, int, int]]:
    """(i0, i1, n): query rows i0:i1 read keys 0:n (when causal and the keys' positions do not
    decrease: those at or before the block's last query)."""
    Tq, Tk = qp.shape[0], kp.shape[0]
    rows = QUERY_BLOCK or max(16, min(256, FIRE_BLOCK_ELEMENTS // max(1, H * Tk)))
    sorted_keys = causal and bool((kp[1:] >= kp[:-1]).all())
    out = []
    for i0 in range(0, Tq, rows):
        i1 = min(i0 + rows, Tq)
        n = int(torch.searchsorted(kp, qp[i0:i1].max(), right=True)) if sorted_keys else Tk
        out.append((i0, i1, n))
    return out


def _fire_tile(tables, qp, kp, mask, causal, dtype, r0, r1, t0, t1, buf) -> torch.Tensor:
    """FIRE's bias of rows r0:r1 and keys t0:t1, [H, r1 - r0, t1 - t0] float32 in buf's
    memory: masked (MASKED) where causal or `mask` forbid, rounded to `dtype` as bias()
    rounds."""
    psi, den, pieces = tables
    H = pieces[1].shape[0]
    tile = buf[: H * (r1 - r0) * (t1 - t0)].view(H, r1 - r0, t1 - t0)
    cpu_bias.fire_bias(tile, psi, den[r0:r1], qp[r0:r1], kp[t0:t1], pieces, causal, MASKED)
    if dtype != torch.float32:
        tile.copy_(tile.to(dtype)).clamp_(min=MASKED)  # finfo.min rounds to -inf in bf16
    if mask is not None:
        tile.masked_fill_(~mask[:, r0:r1, t0:t1], MASKED)
    return tile


def _no_key(qp, kp, mask, causal: bool) -> torch.Tensor | None:
    """[1 or H, Tq] True at rows that may attend to no key; None where every row may."""
    if mask is None:
        return (qp < kp.min())[None] if causal else None
    allowed = mask & (kp[None, None, :] <= qp[None, :, None]) if causal else mask
    return ~allowed.any(-1)


class _FireBias(torch.autograd.Function):
    """q [b, H, Tq, Dh], k / v [b, H, Tk, Dh] float32; psi, den, z, A, B (FIRE.mlp_form);
    qp [Tq], kp [Tk] int64 -> out float32 [b, H, Tq, Dh]."""

    @staticmethod
    def forward(ctx, q, k, v, psi, den, z, A, B, qp, kp, mask, causal, scale, dtype):
        Bq, H, Tq, Dh = q.shape
        pieces = tuple(t.contiguous() for t in (z, A, B))
        tables = (psi.contiguous(), den.contiguous(), pieces)
        out, lse = q.new_zeros(Bq, H, Tq, Dh), q.new_zeros(Bq, H, Tq)  # rows with no key: 0
        blocks = _fire_blocks(qp, kp, causal, H)
        buf = q.new_empty(max((i1 - i0) * n for i0, i1, n in blocks) * H)  # one block's bias
        for i0, i1, n in blocks:
            if n == 0:
                continue
            bias = _fire_tile(tables, qp, kp, mask, causal, dtype, i0, i1, 0, n, buf)
            o, l = _FWD(q[:, :, i0:i1], k[:, :, :n], v[:, :, :n], 0.0, False,
                        attn_mask=bias[None], scale=scale)  # fmt: skip
            out[:, :, i0:i1] = o
            lse[:, :, i0:i1] = l
        # a row with no key to attend gives 0, and lse 0: P = exp(MASKED - 0) = 0 in backward
        dead = _no_key(qp, kp, mask, causal)
        if dead is not None:
            out.masked_fill_(dead[..., None], 0.0)
            lse.masked_fill_(dead, 0.0)
        ctx.save_for_backward(q, k, v, out, lse, *tables[:2], *tables[2])
        ctx.rest = qp, kp, mask, causal, scale, dtype, blocks
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        q, k, v, out, lse, psi, den, *pieces = ctx.saved_tensors
        qp, kp, mask, causal, scale, dtype, blocks = ctx.rest
        tables = (psi, den, tuple(pieces))
        learned = any(ctx.needs_input_grad[3:8])
        grads = [torch.zeros(t.shape, dtype=torch.float64) for t in (psi, den, *pieces[1:])]
        buf = q.new_empty(q.shape[1] * GRAD_TILE[0] * GRAD_TILE[1])

        def bias_grad(P, dS, lse_t, D_t, r0, r1, t0, t1):
            bias = _fire_tile(tables, qp, kp, mask, causal, dtype, r0, r1, t0, t1, buf)
            cpu_bias.bias_grad(P, dS, bias, lse_t, D_t, None, 0, scale, write=True)
            if learned:  # the bias's gradient, dS summed over the batch
                g = dS[0] if dS.shape[0] == 1 else dS.sum(0)
                mine = (grads[0], grads[1][r0:r1], *grads[2:])
                cpu_bias.fire_grad(
                    g, psi, den[r0:r1], qp[r0:r1], kp[t0:t1], tables[2], causal, mine
                )

        tiles = _tiles(blocks, lambda block, r1: (0, block[2]))
        dq, dk, dv = _tiled_grads(q, k, v, out, lse, dout, scale, tiles, bias_grad)
        dpsi, dden, dA, dB = (g.float() for g in grads)
        return dq, dk, dv, dpsi, dden, None, dA, dB, None, None, None, None, None, None
