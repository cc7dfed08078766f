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
    distance a bias of the distance alone (an encoding that declares `distance`, whose
             distance_bias it reads: alibi, t5, kerple, sandwich, fire below its threshold)
             on CPU, consecutive integer positions, no mask: the bias is a strided view of
             an O(Tq + Tk) vector read by torch's CPU flash kernel, at about the speed of
             attention without a bias, O(T) extra memory, with gradients
             (posenc.attention.fast_bias). FIRE also past its threshold, at any integer
             positions, with a mask: its bias per block of rows, O(H·rows·Tk) extra memory.
             Refuses (ValueError) any other call, and any
             encoding that does not declare `distance` (rope, nope, dape, stickbreaking, ...).

Each backend is an entry of REGISTRY (name -> can_run(call) -> None | reason, picks(call),
run(call)) over one validated Call (posenc.attention.call; positions of any integer dtype as
int64). An explicit backend that cannot run a call raises BackendRefused, a ValueError with
its reason. `auto` runs the first of AUTO_ORDER (distance, sdpa, flex, chunked) that picks
the call and can run it, which gives:
    0. `distance` wherever it runs (fast_bias.plan says why not; POSENC_DISTANCE_BIAS=0 turns
       it off), else `choose_backend`:
    1. no bias and no values hook (absolute, rotary, none)  -> sdpa (flash kernels, is_causal).
    2. a hook of base.SCORE_HOOKS: values (Shaw), transform_logits (DAPE), normalize
       (stick-breaking)                                      -> chunked (needs the logits /
       probabilities in hand; sdpa and flex refuse these with a ValueError).
    3. a bias with B·H·Tq·Tk <= AUTO_MATERIALIZE (2**22, a 16 MiB float32 bias) -> sdpa with
       the materialized bias.
    4. a position-only bias on CUDA                          -> flex.
    5. otherwise                                             -> chunked. On CPU flex is never
       picked: it has no backward there and compiles anew (~20 s) for every new shape.

Causal means key position <= query position, by position VALUES (so decoding with Tq < Tk and
packed sequences whose positions restart work); for 2-D / 3-D positions it is by index, the
queries being the last Tq of the Tk keys. A row with no key to attend returns zeros.

Modules: call (the Call and the Backend protocol), inputs (validation and default positions),
eager (the reference math: masks and one block of queries), backends (eager, sdpa, chunked,
flex), fast_bias (distance).
"""

from __future__ import annotations

import torch

from posenc.attention.backends import (  # BLOCK_ELEMENTS is read there: patch it there
    AUTO_MATERIALIZE,
    BLOCK_ELEMENTS,
    Chunked,
    Eager,
    Flex,
    Sdpa,
    chunked_backend,
    eager_backend,
    flex_backend,
    needs_grad,
    sdpa_backend,
)
from posenc.attention.call import Backend, BackendRefused, Call
from posenc.attention.eager import allowed_mask, attend_block, repeat_kv
from posenc.attention.fast_bias import Distance
from posenc.attention.inputs import check_qkv, prepare_mask, prepare_positions
from posenc.base import PositionalEncoding, one_directional, positions_given
from posenc.checks import check_int

__all__ = ["AUTO_MATERIALIZE", "AUTO_ORDER", "BACKENDS", "BLOCK_ELEMENTS", "REGISTRY", "Backend",
           "BackendRefused", "Call", "allowed_mask", "attend_block", "attention", "check_qkv",
           "choose_backend", "one_directional", "chunked_backend", "eager_backend", "flex_backend",
           "needs_grad", "prepare", "prepare_mask", "prepare_positions", "repeat_kv",
           "sdpa_backend"]  # fmt: skip

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
    """Scaled dot-product attention with a positional encoding applied.

    q [B, H, Tq, Dh], k / v [B, Hkv, Tk, Dh] (H % Hkv == 0) -> [B, H, Tq, Dh] in q's dtype.
    Positions: [T] or [B, T] (with a trailing [..., P] axis for 2-D / 3-D encodings); the
    default is arange(Tk) for keys and its last Tq for queries. `mask` is boolean
    (True = may attend), broadcastable to [B, H, Tq, Tk]. The encoding's hooks run in order:
    rotate(q, k), logits = q·k·softmax_scale(Dh) + bias(q, k), transform_logits, mask,
    softmax (or normalize), @ v, + values. An explicit backend that cannot run the call
    raises a ValueError (BackendRefused) saying why.
    """
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
