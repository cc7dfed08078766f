"""The backends of posenc.attention other than eager: sdpa, chunked and flex. Each takes the
validated, rotated q [B, H, Tq, Dh] and k / v [B, Hkv, Tk, Dh] (chunked: k / v already
repeated to H heads) and returns [B, H, Tq, Dh] in q's dtype."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from posenc.attention.eager import allowed_mask, attend_block, repeat_kv
from posenc.checks import position_at

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


def refuse_score_hooks(enc, backend: str) -> None:
    """ValueError naming a backend that works, where `enc` uses a hook of SCORE_HOOKS."""
    hooks = enc.score_hooks if enc is not None else ()
    if hooks:
        raise ValueError(
            f"backend={backend!r} cannot run {type(enc).__name__}: its {hooks[0]}() hook "
            f"{NEEDS[hooks[0]]}; use backend='chunked' or 'eager'"
        )


def sdpa_backend(q, k, v, enc, q_pos, k_pos, causal, mask, scale, default_pos):
    """F.scaled_dot_product_attention; a bias is materialized as a float attn_mask."""
    refuse_score_hooks(enc, "sdpa")
    H, Tq, Tk = q.shape[1], q.shape[2], k.shape[2]
    bias = None
    if enc is not None and enc.has_bias:
        bias = enc.bias(q, repeat_kv(k, H), q_pos, k_pos)
    P = enc.position_dims if enc is not None else 1
    if causal and default_pos and mask is None and Tq == Tk and bias is None:
        attn_mask, is_causal = None, True  # the fused causal kernel, no mask tensor
    else:
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


def chunked_backend(q, k, v, enc, q_pos, k_pos, causal, mask, scale, block_size, default_pos):
    """Query blocks; the bias and mask are built per block: memory O(B·H·block_size·Tk).

    With causal attention and default positions a block reads only the keys up to its last
    query (half the work of a full pass); otherwise every block reads every key.
    """
    B, H, Tq, _ = q.shape
    Tk = k.shape[2]
    P = enc.position_dims if enc is not None else 1
    grad = needs_grad(q, k, v, enc)
    if block_size is None:  # keep each block's [B, H, block, Tk] temporaries small
        block_size = max(16, min(256, BLOCK_ELEMENTS // max(1, B * H * Tk)))

    def block(qb, kb, vb, start, stop):
        end = kb.shape[2]
        qp = q_pos[..., start:stop] if P == 1 else q_pos[..., start:stop, :]
        kp = k_pos[..., :end] if P == 1 else k_pos[..., :end, :]
        m = None if mask is None else mask[..., :end] if mask.shape[-1] > 1 else mask
        allowed = allowed_mask(q_pos, kp, causal, m, start, stop, P, Tk - Tq)
        return attend_block(qb, kb, vb, enc, qp, kp, allowed, scale)

    outs = []
    for start in range(0, Tq, block_size):
        stop = min(start + block_size, Tq)
        end = Tk - Tq + stop if causal and default_pos else Tk  # later keys are all masked
        args = (q[:, :, start:stop], k[:, :, :end], v[:, :, :end], start, stop)
        # recompute each block in backward: saved activations stay O(block_size·Tk)
        outs.append(checkpoint(block, *args, use_reentrant=False) if grad else block(*args))
    return torch.cat(outs, dim=2) if len(outs) > 1 else outs[0]


_FLEX = {}  # the compiled flex_attention, built on first use


def flex_backend(q, k, v, enc, q_pos, k_pos, causal, mask, scale):
    """FlexAttention with encoding.score_mod and a block mask from causal / mask."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    B, H, Tq, _ = q.shape
    Tk = k.shape[2]
    name = type(enc).__name__ if enc is not None else "no encoding"
    refuse_score_hooks(enc, "flex")
    if q.device.type == "cpu" and needs_grad(q, k, v, enc):
        raise NotImplementedError(
            "backend='flex' has no backward pass on CPU in this torch; use backend='chunked' "
            "(or run under torch.no_grad())"
        )
    if q_pos.dim() == 2 and k_pos.dim() == 2 and q_pos.shape[0] == k_pos.shape[0] == 1:
        q_pos, k_pos = q_pos[0], k_pos[0]  # [1, T]: shared by the batch
    score_mod = None
    if enc is not None and enc.has_bias:
        score_mod = enc.score_mod(q_pos, k_pos)
        if score_mod is None:
            raise ValueError(
                f"backend='flex' cannot run {name}: its bias depends on q/k (no score_mod); "
                "use backend='chunked'"
            )
    P = enc.position_dims if enc is not None else 1
    if P > 1:  # causal by index, the queries being the last Tq keys
        q_pos, k_pos = torch.arange(Tk - Tq, Tk, device=q.device), torch.arange(Tk, device=q.device)
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
        q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=True
    )
