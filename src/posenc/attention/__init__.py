"""attention(q, k, v, encoding): one attention function for every positional encoding.

Backends (the same numbers up to float tolerance; `eager` is the reference):
    eager     float32 logits, the full [B, H, Tq, Tk] score matrix.
    sdpa      F.scaled_dot_product_attention; a bias as a materialized float attn_mask.
    flex      FlexAttention with encoding.score_mod and a block mask, compiled once: biases of
              positions alone. On CPU forward only (with gradients NotImplementedError).
    chunked   query blocks of `block_size` (default 16..256: a block's [B, H, block, Tk] at
              2**23 elements), the bias built per block, each block checkpointed under grad:
              O(B·H·block·Tk) memory forward and backward, exact (every block sees every key).
    distance  a bias of the distance alone (an encoding declaring `distance`) on CPU, at
              consecutive integer positions, no mask: a strided view of an O(Tq + Tk) vector
              read by torch's CPU flash kernel (posenc.attention.fast_bias); FIRE also past
              its threshold, any integer positions, a mask. Refuses anything else.

Each backend is an entry of REGISTRY (can_run(call) -> None | reason, picks(call), run(call))
over one validated Call (posenc.attention.call). An explicit backend that cannot run a call
raises BackendRefused (a ValueError with its reason). `auto` runs the first of AUTO_ORDER
that picks the call and can run it:
    0. distance wherever it runs (fast_bias.plan; POSENC_DISTANCE_BIAS=0 turns it off), else
    1. no bias, no values hook (absolute, rotary, none)        -> sdpa (flash, is_causal)
    2. a base.SCORE_HOOKS hook (Shaw, DAPE, stick-breaking)     -> chunked (sdpa, flex refuse)
    3. a bias with B·H·Tq·Tk <= AUTO_MATERIALIZE (2**22)       -> sdpa, the bias materialized
    4. a position-only bias on CUDA                             -> flex
    5. otherwise -> chunked (on CPU flex has no backward and recompiles per shape, ~20 s).

Causal: key position <= query position, by VALUE (decoding with Tq < Tk, packed sequences
whose positions restart); for 2-D / 3-D positions by index, the queries the last Tq of the Tk
keys. A row with no key to attend returns zeros.
"""

from __future__ import annotations

import torch

from posenc.attention.backends import AUTO_MATERIALIZE, Chunked, Eager, Flex, Sdpa
from posenc.attention.call import Backend, BackendRefused, Call
from posenc.attention.fast_bias import Distance
from posenc.attention.inputs import check_qkv, prepare_mask, prepare_positions
from posenc.base import PositionalEncoding, one_directional, positions_given
from posenc.checks import check_int

__all__ = ["AUTO_MATERIALIZE", "AUTO_ORDER", "BACKENDS", "REGISTRY", "Backend", "BackendRefused",
           "Call", "attention", "choose_backend", "prepare"]  # fmt: skip

# The backends, name -> Backend (can_run / picks / run); `auto` tries AUTO_ORDER in turn.
REGISTRY: dict[str, Backend] = {
    "distance": Distance(),
    "sdpa": Sdpa(),
    "flex": Flex(),
    "chunked": Chunked(),
    "eager": Eager(),
}
AUTO_ORDER = ("distance", "sdpa", "flex", "chunked")
BACKENDS = ("auto", *REGISTRY)


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
    """q [B, H, Tq, Dh], k / v [B, Hkv, Tk, Dh] -> [B, H, Tq, Dh] in q's dtype, the encoding's
    hooks in base.py's order. Positions [T] or [B, T] (+ [..., P]), default arange(Tk), the
    last Tq for queries; mask bool (True = may attend) broadcastable to [B, H, Tq, Tk]."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    with positions_given():  # prepare validates them once; the hooks take them as given
        call = prepare(q, k, v, encoding, q_pos, k_pos, causal, mask, block_size)
        if call is None:  # nothing to attend: an empty result, or zeros as SDPA gives
            return q.new_zeros(q.shape[0], q.shape[1], q.shape[2], v.shape[-1])
        if backend == "auto":
            backend = next(
                name for name in AUTO_ORDER
                if REGISTRY[name].picks(call) and REGISTRY[name].can_run(call) is None
            )  # fmt: skip
        else:
            why = REGISTRY[backend].can_run(call)
            if why is not None:
                raise BackendRefused(why)
        return REGISTRY[backend].run(call)


def prepare(q, k, v, encoding, q_pos, k_pos, causal, mask, block_size) -> Call | None:
    """Validate and normalize attention's inputs once (errors name the argument); rotate q
    and k. None where there is nothing to attend (Tq or Tk is 0)."""
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
    if not causal and encoding is not None and not encoding.bidirectional:
        raise ValueError(one_directional(encoding))
    if block_size is not None:
        check_int("block_size", block_size, low=1)
    default_pos = q_pos is None and k_pos is None
    if q_pos is None and Tq > Tk:
        raise ValueError(
            f"q_pos must be given when Tq > Tk (default queries are the last Tq of "
            f"arange(Tk)); got Tq={Tq}, Tk={Tk}"
        )
    same = q_pos is k_pos and q_pos is not None and Tq == Tk  # one tensor: checked once
    q_pos = prepare_positions(q_pos, "q_pos", Tq, B, Tk - Tq, q.device, encoding)
    k_pos = q_pos if same else prepare_positions(k_pos, "k_pos", Tk, B, 0, q.device, encoding)
    mask = prepare_mask(mask, B, H, Tq, Tk)
    if Tq == 0 or Tk == 0:
        return None
    scale = encoding.softmax_scale(Dh) if encoding is not None else Dh**-0.5
    if encoding is not None:
        q, k = encoding.rotate(q, k, q_pos, k_pos)
    return Call(q, k, v, encoding, q_pos, k_pos, causal, mask, scale, default_pos, block_size)


def choose_backend(enc: PositionalEncoding | None, q: torch.Tensor, k: torch.Tensor) -> str:
    """The backend `auto` runs where `distance` cannot (rules 1-5 in posenc.attention's doc):
    the first of AUTO_ORDER after distance that picks a call of these shapes."""
    call = Call(q, k, k, enc, None, None, True, None, 1.0, True)
    return next(name for name in AUTO_ORDER[1:] if REGISTRY[name].picks(call))
