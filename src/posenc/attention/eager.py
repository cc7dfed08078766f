"""The reference math of posenc.attention: the kv repeat, the allowed mask (causal by position
value, and the user's) and a block of queries in float32 (eager: all at once; chunked: blocks)."""

from __future__ import annotations

import torch


def repeat_kv(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[B, Hkv, T, Dh] -> [B, H, T, Dh]; query head h reads kv head h // (H / Hkv)."""
    return x if x.shape[1] == heads else x.repeat_interleave(heads // x.shape[1], dim=1)


def allowed_mask(q_pos, k_pos, causal, mask, start, stop, P=1, offset=0):
    """Bool [B or 1, H or 1, stop - start, Tk] (True = may attend) for query rows start:stop;
    causal by value, by index for 2-D / 3-D positions (row r is key offset + r)."""
    allowed = None
    if causal:
        if P == 1:  # [Tq] or [B, Tq] against [Tk] or [B, Tk]
            qp, kp = q_pos[..., start:stop], k_pos
        else:
            qp = torch.arange(offset + start, offset + stop, device=k_pos.device)
            kp = torch.arange(k_pos.shape[-2], device=k_pos.device)
        allowed = (kp.unsqueeze(-2) <= qp.unsqueeze(-1)).unsqueeze(-3)  # [(B,) 1, tq, Tk]
        if allowed.dim() == 3:
            allowed = allowed.unsqueeze(0)
    if mask is not None:
        block = mask if mask.shape[-2] == 1 else mask[..., start:stop, :]
        allowed = block if allowed is None else allowed & block
    return allowed


def attend_block(q, k, v, enc, q_pos, k_pos, allowed, scale):
    """q [B, H, tq, Dh], k / v [B, H, Tk, Dh] -> [B, H, tq, Dh] in q's dtype: the hooks in
    base.py's order, float32, in place where autograd allows (about two [B, H, tq, Tk])."""
    logits = torch.matmul(q.float() * scale, k.float().transpose(-1, -2))  # [B, H, tq, Tk]
    bias = enc.bias(q, k, q_pos, k_pos) if enc is not None else None
    if bias is not None:
        logits += bias
        del bias
    hooks = enc.score_hooks if enc is not None else ()
    if "transform_logits" in hooks:  # before the mask: DAPE's MLP sees every logit
        logits = enc.transform_logits(logits, q, k, q_pos, k_pos).float()
    if "normalize" in hooks:  # stick-breaking: its own weights, zero where not allowed
        probs = enc.normalize(logits, allowed, q_pos, k_pos).float()
    else:
        if allowed is not None:
            # finfo.min, not -inf: a fully masked row stays finite (no NaN in the backward pass)
            logits = logits.masked_fill_(~allowed, torch.finfo(torch.float32).min)
        probs = torch.softmax(logits, dim=-1)
    del logits
    out = torch.matmul(probs, v.float())
    extra = enc.values(probs, q_pos, k_pos) if enc is not None else None
    if extra is not None:
        out = out + extra.float()
    if allowed is not None:  # a row with no key to attend gives zeros (as SDPA does)
        out = out * allowed.any(dim=-1, keepdim=True)
    return out.to(q.dtype)
