"""attention(q, k, v, encoding): one attention function for every positional encoding.

Backends (all return the same numbers up to float tolerance; `eager` is the reference):
    eager    logits in float32, the full [B, H, Tq, Tk] score matrix.
    sdpa     F.scaled_dot_product_attention; a bias is passed as a float attn_mask (materialized).
    flex     FlexAttention with encoding.score_mod and a block mask, compiled once (cached).
             Position-only biases (no values hook). On CPU this torch runs it only forward:
             with gradients required it raises NotImplementedError (use `chunked`).
    chunked  query blocks of `block_size` (default: 16..256, as many as keep a block's
             [B, H, block, Tk] at 2**23 elements); the bias is built per block, so peak memory
             is O(B·H·block_size·Tk). Each block is checkpointed when gradients are needed, so the
             backward pass is memory-bounded too. Exact (no online-softmax approximation: each
             block sees every key).

`auto` picks (see `choose_backend`):
    1. no bias and no values hook (absolute, rotary, none)  -> sdpa (flash kernels, is_causal).
    2. a values hook (Shaw)                                  -> chunked (needs the probabilities).
    3. a bias with B·H·Tq·Tk <= AUTO_MATERIALIZE (2**22, a 16 MiB float32 bias) -> sdpa with
       the materialized bias.
    4. a position-only bias on CUDA                          -> flex.
    5. otherwise                                             -> chunked. On CPU flex is never
       picked: it has no backward there and compiles anew (~20 s) for every new shape.

Causal means key position <= query position, by position VALUES (so decoding with Tq < Tk and
packed sequences whose positions restart work); for 2-D / 3-D positions it is by index, the
queries being the last Tq of the Tk keys. A row with no key to attend returns zeros.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from posenc.base import PositionalEncoding
from posenc.checks import check_positions, position_at, renamed

BACKENDS = ("auto", "eager", "sdpa", "flex", "chunked")
AUTO_MATERIALIZE = 2**22  # largest B·H·Tq·Tk for which `auto` materializes a bias for sdpa
BLOCK_ELEMENTS = 2**23  # default chunked block: B·H·block_size·Tk <= this (a 32 MiB fp32 score)


@renamed(q_positions="q_pos", k_positions="k_pos")
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    encoding: PositionalEncoding | None = None,
    q_pos: torch.Tensor | None = None,
    k_pos: torch.Tensor | None = None,
    causal: bool = True,
    backend: str = "auto",
    mask: torch.Tensor | None = None,
    block_size: int | None = None,
) -> torch.Tensor:
    """Scaled dot-product attention with a positional encoding applied.

    q [B, H, Tq, Dh], k / v [B, Hkv, Tk, Dh] (H % Hkv == 0) -> [B, H, Tq, Dh] in q's dtype.
    Positions: [T] or [B, T] (with a trailing [..., P] axis for 2-D / 3-D encodings); the
    default is arange(Tk) for keys and its last Tq for queries. `mask` is boolean
    (True = may attend), broadcastable to [B, H, Tq, Tk]. The encoding's hooks run in order:
    rotate(q, k), logits = q·k·softmax_scale(Dh) + bias(q, k), mask, softmax, @ v, + values.
    """
    B, H, Tq, Dh, Hkv, Tk = check_qkv(q, k, v)
    if encoding is not None and not isinstance(encoding, PositionalEncoding):
        raise TypeError(
            f"encoding must be a posenc.PositionalEncoding or None, got {type(encoding).__name__}"
        )
    enc_heads = getattr(encoding, "heads", None)
    if isinstance(enc_heads, int) and enc_heads != H:
        raise ValueError(
            f"encoding {type(encoding).__name__} was built for heads={enc_heads}, "
            f"but q has H={H} heads; build it with heads={H}"
        )
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if block_size is not None and (not isinstance(block_size, int) or block_size < 1):
        raise ValueError(f"block_size must be a positive int or None, got {block_size!r}")
    P = encoding.position_dims if encoding is not None else 1
    default_pos = q_pos is None and k_pos is None
    if q_pos is None and Tq > Tk:
        raise ValueError(
            f"q_pos must be given when Tq > Tk (default queries are the last Tq of "
            f"arange(Tk)); got Tq={Tq}, Tk={Tk}"
        )
    q_pos = prepare_positions(q_pos, "q_pos", Tq, B, P, Tk - Tq, q.device)
    k_pos = prepare_positions(k_pos, "k_pos", Tk, B, P, 0, q.device)
    mask = prepare_mask(mask, B, H, Tq, Tk)
    scale = encoding.softmax_scale(Dh) if encoding is not None else Dh**-0.5

    if encoding is not None:
        q, k = encoding.rotate(q, k, q_pos, k_pos)
    if backend == "auto":
        backend = choose_backend(encoding, q, k)
    if backend == "sdpa":
        return sdpa_backend(q, k, v, encoding, q_pos, k_pos, causal, mask, scale, default_pos)
    if backend == "flex":
        return flex_backend(q, k, v, encoding, q_pos, k_pos, causal, mask, scale)
    k, v = repeat_kv(k, H), repeat_kv(v, H)
    if backend == "eager":
        allowed = allowed_mask(q_pos, k_pos, causal, mask, 0, Tq, P, Tk - Tq)
        return attend_block(q, k, v, encoding, q_pos, k_pos, allowed, scale)
    return chunked_backend(
        q, k, v, encoding, q_pos, k_pos, causal, mask, scale, block_size, default_pos
    )


# ------------------------------------------------------------------------------ validation


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, ...]:
    """(B, H, Tq, Dh, Hkv, Tk) after checking q [B, H, Tq, Dh] and k, v [B, Hkv, Tk, Dh]."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D [B, H, T, Dh], got shape {tuple(t.shape)}")
    B, H, Tq, Dh = q.shape
    _, Hkv, Tk, _ = k.shape
    if k.shape != v.shape:
        raise ValueError(
            f"k and v must have the same shape [B, Hkv, Tk, Dh], got k {tuple(k.shape)} "
            f"and v {tuple(v.shape)}"
        )
    if k.shape[0] != B or k.shape[3] != Dh:
        raise ValueError(
            f"k must be [B={B}, Hkv, Tk, Dh={Dh}] to match q {tuple(q.shape)}, got {tuple(k.shape)}"
        )
    if Hkv == 0 or H % Hkv:
        raise ValueError(
            f"q heads H={H} must be a multiple of k/v heads Hkv={Hkv} (grouped-query attention)"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    return B, H, Tq, Dh, Hkv, Tk


def prepare_positions(
    positions: torch.Tensor | None,
    name: str,
    T: int,
    B: int,
    P: int,
    offset: int,
    device: torch.device,
) -> torch.Tensor:
    """Validated positions, or the default arange(offset, offset + T) ([T] or [T, P])."""
    if positions is None:
        pos = torch.arange(offset, offset + T, device=device)
        return pos[:, None].expand(T, P) if P > 1 else pos
    nd = 1 if P == 1 else 2  # dims of the unbatched form
    want = f"[{T}] or [B={B}, {T}]" if P == 1 else f"[{T}, {P}] or [B={B}, {T}, {P}]"
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {want}")
    shape = tuple(positions.shape)
    ok = positions.dim() in (nd, nd + 1) and shape[positions.dim() - nd] == T
    ok = ok and (positions.dim() == nd or shape[0] in (1, B))
    if not ok or (P > 1 and shape[-1] != P):
        raise ValueError(f"{name} must have shape {want}, got {shape}")
    return check_positions(positions.to(device), name=name, position_dims=P)


def prepare_mask(mask: torch.Tensor | None, B: int, H: int, Tq: int, Tk: int):
    """mask as a 4-D bool view broadcastable to [B, H, Tq, Tk], or None."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        what = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"mask must be a bool tensor (True = may attend), got {what}")
    try:
        ok = mask.dim() <= 4 and torch.broadcast_shapes(mask.shape, (B, H, Tq, Tk)) == (
            B,
            H,
            Tq,
            Tk,
        )
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"mask must be broadcastable to [B, H, Tq, Tk] = {[B, H, Tq, Tk]}, "
            f"got {tuple(mask.shape)}"
        )
    return mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))


# ------------------------------------------------------------------------------ helpers


def needs_grad(q, k, v, enc) -> bool:
    """True when autograd will track this call (an input or an encoding parameter needs grad)."""
    if not torch.is_grad_enabled():
        return False
    params = enc.parameters() if enc is not None else ()
    return any(t.requires_grad for t in (q, k, v)) or any(p.requires_grad for p in params)


def repeat_kv(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[B, Hkv, T, Dh] -> [B, H, T, Dh]; query head h reads kv head h // (H / Hkv)."""
    return x if x.shape[1] == heads else x.repeat_interleave(heads // x.shape[1], dim=1)


def allowed_mask(q_pos, k_pos, causal, mask, start, stop, P=1, offset=0):
    """Bool [B or 1, H or 1, stop - start, Tk] (True = may attend) for query rows start:stop.

    Causal compares position values; for 2-D / 3-D positions it compares indices, query row r
    being key `offset + r` (offset = Tk - Tq: the queries are the last Tq keys).
    """
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
    """The reference math for a block of queries: q [B, H, tq, Dh], k / v [B, H, Tk, Dh].

    Logits, softmax and the weighted sum in float32; returns [B, H, tq, Dh] in q's dtype.
    In-place where autograd allows, so a block holds about two [B, H, tq, Tk] tensors.
    """
    logits = torch.matmul(q.float() * scale, k.float().transpose(-1, -2))  # [B, H, tq, Tk]
    bias = enc.bias(q, k, q_pos, k_pos) if enc is not None else None
    if bias is not None:
        logits += bias
        del bias
    if allowed is not None:
        # finfo.min, not -inf: a fully masked row stays finite (no NaN in the backward pass)
        logits.masked_fill_(~allowed, torch.finfo(torch.float32).min)
    probs = torch.softmax(logits, dim=-1)
    del logits
    out = torch.matmul(probs, v.float())
    extra = enc.values(probs, q_pos, k_pos) if enc is not None else None
    if extra is not None:
        out = out + extra.float()
    if allowed is not None:  # a row with no key to attend gives zeros (as SDPA does)
        out = out * allowed.any(dim=-1, keepdim=True)
    return out.to(q.dtype)


def choose_backend(enc: PositionalEncoding | None, q: torch.Tensor, k: torch.Tensor) -> str:
    """The backend `auto` runs (the rule is in the module docstring)."""
    if enc is None or not (enc.has_bias or enc.has_values):
        return "sdpa"
    if enc.has_values:
        return "chunked"
    B, H, Tq, _ = q.shape
    if B * H * Tq * k.shape[2] <= AUTO_MATERIALIZE:
        return "sdpa"
    if q.device.type == "cuda" and not enc.content_dependent:
        return "flex"
    return "chunked"


# ------------------------------------------------------------------------------ backends


def sdpa_backend(q, k, v, enc, q_pos, k_pos, causal, mask, scale, default_pos):
    """F.scaled_dot_product_attention; a bias is materialized as a float attn_mask."""
    if enc is not None and enc.has_values:
        raise ValueError(
            f"backend='sdpa' cannot run {type(enc).__name__}: its values() hook needs the "
            "attention probabilities; use backend='chunked' or 'eager'"
        )
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
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=True
    )


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
    if enc is not None and enc.has_values:
        raise ValueError(f"backend='flex' cannot run {name}: values() needs the probabilities")
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
