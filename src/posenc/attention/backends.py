"""posenc.attention's backends but distance (fast_bias): sdpa, eager, chunked, flex, each a
Backend (posenc.attention.call) running one validated Call."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from posenc.attention.call import Backend, BackendRefused, Call
from posenc.attention.eager import allowed_mask, attend_block, repeat_kv
from posenc.checks import position_at

AUTO_MATERIALIZE = 2**22  # largest B·H·Tq·Tk for which `auto` materializes a bias for sdpa
BLOCK_ELEMENTS = 2**23  # default chunked block: B·H·block_size·Tk <= this (a 32 MiB fp32 score)


def needs_grad(q, k, v, enc) -> bool:
    """True when autograd will track this call (an input or an encoding parameter needs grad)."""
    if not torch.is_grad_enabled():
        return False
    params = enc.parameters() if enc is not None else ()
    return any(t.requires_grad for t in (q, k, v)) or any(p.requires_grad for p in params)


NEEDS = {  # why a fused kernel cannot run a hook of base.SCORE_HOOKS
    "values": "needs the attention probabilities",
    "transform_logits": "post-processes the logits matrix, which the fused kernel never forms",
    "normalize": "replaces the softmax, which the fused kernel has built in",
}


def score_hook_refusal(call: Call, backend: str) -> str | None:
    """Why a fused kernel cannot run `call` (a hook of SCORE_HOOKS), naming what works."""
    hooks = call.score_hooks
    if not hooks:
        return None
    return (f"backend={backend!r} cannot run {call.name}: its {hooks[0]}() hook "
            f"{NEEDS[hooks[0]]}; use backend='chunked' or 'eager'")  # fmt: skip


class Sdpa(Backend):
    """F.scaled_dot_product_attention; a bias is materialized as a float attn_mask."""

    def can_run(self, call: Call) -> str | None:
        return score_hook_refusal(call, "sdpa")

    def picks(self, call: Call) -> bool:
        """No score hook, and no bias or one small enough to materialize (AUTO_MATERIALIZE)."""
        if call.score_hooks:
            return False
        B, H, Tq, _ = call.q.shape
        return not call.has_bias or B * H * Tq * call.k.shape[2] <= AUTO_MATERIALIZE

    def run(self, call: Call) -> torch.Tensor:
        q, k, v, enc, q_pos, k_pos = call.q, call.k, call.v, call.encoding, call.q_pos, call.k_pos
        mask, causal, scale = call.mask, call.causal, call.scale
        H, Tq, Tk = q.shape[1], q.shape[2], k.shape[2]
        bias = enc.bias(q, repeat_kv(k, H), q_pos, k_pos) if call.has_bias else None
        if causal and call.default_pos and mask is None and Tq == Tk and bias is None:
            attn_mask, is_causal = None, True  # the fused causal kernel, no mask tensor
        else:
            P = call.position_dims
            attn_mask = allowed_mask(q_pos, k_pos, causal, mask, 0, Tq, P, Tk - Tq)
            is_causal = False
            if bias is not None:
                bias = bias.to(q.dtype)
                attn_mask = bias if attn_mask is None else bias.masked_fill(~attn_mask, -torch.inf)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=True
        )
        # SDPA's fused kernels return 0 for a query row holding NaN / inf; eager gives NaN: agree
        return torch.where(torch.isfinite(q).all(-1, keepdim=True), out, torch.nan)


class Eager(Backend):
    """The reference: every query at once, logits in float32 (posenc.attention.eager)."""

    def picks(self, call: Call) -> bool:
        return False  # the reference: never auto's choice

    def run(self, call: Call) -> torch.Tensor:
        _, H, Tq, _ = call.q.shape
        Tk = call.k.shape[2]
        q_pos, k_pos, P = call.q_pos, call.k_pos, call.position_dims
        k, v = repeat_kv(call.k, H), repeat_kv(call.v, H)
        allowed = allowed_mask(q_pos, k_pos, call.causal, call.mask, 0, Tq, P, Tk - Tq)
        return attend_block(call.q, k, v, call.encoding, q_pos, k_pos, allowed, call.scale)


class Chunked(Backend):
    """Query blocks, bias and mask per block: O(B·H·block_size·Tk) memory; causal with default
    positions, a block reads only the keys up to its last query. Auto's last resort."""

    def run(self, call: Call) -> torch.Tensor:
        enc, q_pos, k_pos, mask = call.encoding, call.q_pos, call.k_pos, call.mask
        causal, P = call.causal, call.position_dims
        B, H, Tq, _ = call.q.shape
        q, k, v = call.q, repeat_kv(call.k, H), repeat_kv(call.v, H)
        Tk = k.shape[2]
        grad = needs_grad(q, k, v, enc)
        block_size = call.block_size
        if block_size is None:  # keep each block's [B, H, block, Tk] temporaries small
            block_size = max(16, min(256, BLOCK_ELEMENTS // max(1, B * H * Tk)))

        def block(qb, kb, vb, start, stop):
            end = kb.shape[2]
            qp = q_pos[..., start:stop] if P == 1 else q_pos[..., start:stop, :]
            kp = k_pos[..., :end] if P == 1 else k_pos[..., :end, :]
            m = None if mask is None else mask[..., :end] if mask.shape[-1] > 1 else mask
            allowed = allowed_mask(q_pos, kp, causal, m, start, stop, P, Tk - Tq)
            return attend_block(qb, kb, vb, enc, qp, kp, allowed, call.scale)

        outs = []
        for start in range(0, Tq, block_size):
            stop = min(start + block_size, Tq)
            end = Tk - Tq + stop if causal and call.default_pos else Tk  # later keys all masked
            args = (q[:, :, start:stop], k[:, :, :end], v[:, :, :end], start, stop)
            # recompute each block in backward: saved activations stay O(block_size·Tk)
            outs.append(checkpoint(block, *args, use_reentrant=False) if grad else block(*args))
        return torch.cat(outs, dim=2) if len(outs) > 1 else outs[0]


_FLEX = {}  # the compiled flex_attention, built on first use


def _no_score_mod(call: Call) -> str:
    return (f"backend='flex' cannot run {call.name}: its bias depends on q/k (no "
            "score_mod); use backend='chunked'")  # fmt: skip


class Flex(Backend):
    """FlexAttention with encoding.score_mod and a block mask from causal / mask."""

    def can_run(self, call: Call) -> str | None:
        if call.score_hooks:
            return score_hook_refusal(call, "flex")
        if call.q.device.type == "cpu" and needs_grad(call.q, call.k, call.v, call.encoding):
            return ("backend='flex' has no backward pass on CPU in this torch; use "
                    "backend='chunked' (or run under torch.no_grad())")  # fmt: skip
        if call.has_bias and "score_mod" not in call.provides:
            return _no_score_mod(call)
        return None

    def picks(self, call: Call) -> bool:
        """A position-only bias on CUDA (on CPU no backward, a compile per shape)."""
        if call.score_hooks or (call.has_bias and "score_mod" not in call.provides):
            return False
        return call.q.device.type == "cuda"

    def run(self, call: Call) -> torch.Tensor:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        q, k, v, enc, q_pos, k_pos = call.q, call.k, call.v, call.encoding, call.q_pos, call.k_pos
        mask, causal = call.mask, call.causal
        B, H, Tq, _ = q.shape
        Tk = k.shape[2]
        if q_pos.dim() == 2 and k_pos.dim() == 2 and q_pos.shape[0] == k_pos.shape[0] == 1:
            q_pos, k_pos = q_pos[0], k_pos[0]  # [1, T]: shared by the batch
        score_mod = enc.score_mod(q_pos, k_pos) if call.has_bias else None
        if call.has_bias and score_mod is None:
            raise BackendRefused(_no_score_mod(call))
        if call.position_dims > 1:  # causal by index, the queries being the last Tq keys
            k_pos = torch.arange(Tk, device=q.device)
            q_pos = k_pos[Tk - Tq :]
        q_at, k_at = position_at(q_pos), position_at(k_pos)
        full = mask.expand(B, H, Tq, Tk) if mask is not None else None

        def mask_mod(b, h, q_idx, kv_idx):
            ok = k_at(b, kv_idx) <= q_at(b, q_idx) if causal else q_idx >= 0
            return ok & full[b, h, q_idx, kv_idx] if full is not None else ok

        block_mask = None
        if causal or mask is not None:
            batched = mask is not None or q_pos.dim() == 2 or k_pos.dim() == 2
            mb, mh = (B if batched else None), (H if mask is not None else None)
            block_mask = create_block_mask(mask_mod, mb, mh, Tq, Tk, device=q.device)
        if "fn" not in _FLEX:
            _FLEX["fn"] = torch.compile(flex_attention, dynamic=False)
        return _FLEX["fn"](
            q, k, v, score_mod=score_mod, block_mask=block_mask, scale=call.scale, enable_gqa=True
        )
