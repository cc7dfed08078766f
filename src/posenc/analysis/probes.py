"""Probes: the tensors the measurements read, got out of any registered encoding through its
hooks (posenc.base), and the measurements that need a built encoding (past the length,
permutation test)."""

from __future__ import annotations

import torch

import posenc
from posenc.analysis.measures import Measure, na
from posenc.base import PositionalEncoding
from posenc.checks import grid_positions
from posenc.encodings import build_for


def lay_out(enc: PositionalEncoding, positions: torch.Tensor) -> torch.Tensor:
    """[T] -> the positions the encoding takes: for 2-D / 3-D ones the diagonal (t, t[, t])
    [T, P], so an offset k in t is the same offset (k, k) everywhere."""
    return grid_positions(positions, enc.position_dims).contiguous()


@torch.no_grad()
def position_vectors(enc: PositionalEncoding, positions: torch.Tensor, *, dim: int):
    """What the encoding attaches to each position, [T, F] float64; None for score encodings.

    absolute (provides `embed`): embed(zeros) (for concatenating encodings the zeros of x come
    along); rotary (provides `angles`): a fixed query and key ones(Dh) / sqrt(Dh) rotated to
    each position, [T, 2 Dh] (they differ for xPos, which scales q and k apart).
    """
    pos = lay_out(enc, positions)
    T = len(positions)
    if "embed" in enc.provides:
        return enc.embed(torch.zeros(1, T, dim), pos)[0].double()
    if "angles" in enc.provides:
        q = torch.full((1, 1, T, dim), dim**-0.5)
        q, k = enc.rotate(q, q, pos, pos)
        return torch.cat([q[0, 0], k[0, 0]], dim=-1).double()
    return None


@torch.no_grad()
def scores(
    enc: PositionalEncoding, q_pos: torch.Tensor, k_pos: torch.Tensor, *, dim: int, heads: int
) -> torch.Tensor:
    """The positional score of (query i, key j), [H or 1, Tq, Tk] float64.

    absolute / rotary: <v_i, v_j> of position_vectors; bias / relative / content: bias() with
    one fixed random q0 and k0 at every position (so only positions vary), then DAPE's
    transform_logits at q.k = 0, and for a normalize hook (stick-breaking) the attention
    weights it gives equal logits (score_label says which); no encoding: zeros.
    """
    if enc.provides & {"embed", "angles"}:
        if "angles" in enc.provides:
            q = torch.full((1, 1, len(q_pos), dim), dim**-0.5)
            k = torch.full((1, 1, len(k_pos), dim), dim**-0.5)
            q, k = enc.rotate(q, k, lay_out(enc, q_pos), lay_out(enc, k_pos))
            return (q[0] @ k[0].transpose(-1, -2)).double()
        vq = position_vectors(enc, q_pos, dim=dim)
        vk = position_vectors(enc, k_pos, dim=dim)
        return (vq @ vk.T)[None]
    hooks = enc.score_hooks
    if enc.has_bias or "transform_logits" in hooks or "normalize" in hooks:
        q0, k0 = torch.randn(2, dim, generator=torch.Generator().manual_seed(0))
        q, k = q0.expand(1, heads, len(q_pos), dim), k0.expand(1, heads, len(k_pos), dim)
        qp, kp = lay_out(enc, q_pos), lay_out(enc, k_pos)
        s = enc.bias(q, k, qp, kp) if enc.has_bias else None
        if s is None:
            s = torch.zeros(1, heads, len(q_pos), len(k_pos))
        if "transform_logits" in hooks:  # DAPE: the logits it makes of q.k = 0 (zero content)
            s = enc.transform_logits(s.float(), q, k, qp, kp)
        if "normalize" in hooks:  # stick-breaking: its weights at equal logits (keys j <= i)
            s = enc.normalize(s.float(), kp[None, :] <= qp[:, None], qp, kp)
        return s[0].double()
    return torch.zeros(1, len(q_pos), len(k_pos), dtype=torch.float64)


@torch.no_grad()
def attention_weights(enc: PositionalEncoding, n: int, *, dim: int, heads: int) -> torch.Tensor:
    """[H or 1, n, n] causal attention weights of positions 0..n-1 from scores (the
    content held fixed): a softmax over keys j <= i, or the weights themselves where the
    encoding normalizes (stick-breaking)."""
    p = torch.arange(n)
    s = scores(enc, p, p, dim=dim, heads=heads)
    if "normalize" in enc.score_hooks:  # already attention weights
        return s
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    return s.masked_fill(future, float("-inf")).softmax(-1)


def score_label(enc: PositionalEncoding) -> str:
    """What scores() measures for `enc`: a logit term, or (normalize hook) attention weights."""
    if "normalize" in enc.score_hooks:
        return "attention weight at equal logits"
    return "added to the logit"


def score_vs_distance(enc: PositionalEncoding, n: int, *, dim: int, heads: int) -> torch.Tensor:
    """[H, n]: score of a query at position n - 1 with the key at distance k = 0..n-1."""
    pos = torch.arange(n)
    s = scores(enc, pos[-1:], pos, dim=dim, heads=heads)[:, 0]  # [H, n], index j
    return s.flip(-1)


def describe_error(err: Exception) -> str:
    return f"{type(err).__name__}: {err}"


def beyond_length(enc: PositionalEncoding, n: int, *, dim: int, heads: int) -> Measure:
    """Evaluate at positions n..4n - 1, past the table / training length n: defined, or the error.

    Position-vector encodings: are the new vectors finite and distinct from those inside?
    Score encodings: does the score keep changing with distance past n, or is it constant?
    """
    limit = enc.max_len or n
    far = torch.arange(4 * limit)
    name = "past the length"
    try:
        vectors = position_vectors(enc, far, dim=dim)
        curve = (
            None if vectors is not None else score_vs_distance(enc, 4 * limit, dim=dim, heads=heads)
        )
    except (ValueError, IndexError, RuntimeError) as err:
        clear = isinstance(err, ValueError)
        verdict = "error (clear)" if clear else "crash"
        return Measure(
            name, float(limit), verdict, clear, f"at position {limit}: {describe_error(err)}"
        )
    values = vectors if vectors is not None else curve
    if not bool(torch.isfinite(values).all()):
        return Measure(name, float(limit), "not finite", False, f"NaN/inf past position {limit}")
    last = 4 * limit - 1
    if vectors is not None:
        dist = torch.cdist(vectors[limit:], vectors[:limit]).min()
        new = bool(dist > 1e-6)
        verdict = "defined, new" if new else "defined, repeats"
        detail = (
            f"positions {limit}..{last} are finite; the smallest distance from one of them to a "
            f"position inside 0..{limit - 1} is {float(dist):.4g}"
        )
        return Measure(name, float(last), verdict, new, detail)
    tail = curve[:, limit - 1 :]
    flat = bool((tail - tail[:, :1]).abs().max() < 1e-9)
    has_signal = float(curve.abs().max()) > 0
    verdict = "defined, constant" if flat and has_signal else "defined"
    detail = f"scores at distances up to {last} are finite" + (
        f"; every distance >= {limit - 1} gets the same score" if flat and has_signal else ""
    )
    return Measure(name, float(last), verdict, has_signal and not flat, detail)


@torch.no_grad()
def one_layer_attention(
    name: str, x: torch.Tensor, *, heads: int, causal: bool, max_len: int
) -> torch.Tensor:
    """x [1, T, D] through embed + one attention layer with fixed random weights -> [1, T, D]."""
    D = x.shape[-1]
    torch.manual_seed(0)
    std = dict(dim=D, heads=heads, head_dim=D // heads, max_len=max_len, train_len=max_len)
    enc = build_for(name, causal=causal, **std).eval()  # an encoder gets the bidirectional form
    T = x.shape[1]
    pos = lay_out(enc, torch.arange(T))
    h = enc.embed(x, pos)
    g = torch.Generator().manual_seed(1)
    w = torch.randn(3, h.shape[-1], D, generator=g) / h.shape[-1] ** 0.5
    q, k, v = (
        (h @ w[i]).view(1, T, heads, D // heads).transpose(1, 2) for i in range(3)
    )  # [1, H, T, Dh]
    y = posenc.attention(q, k, v, enc, q_pos=pos, k_pos=pos, causal=causal)
    return y.transpose(1, 2).reshape(1, T, D)


def permutation_change(
    name: str, *, dim: int, heads: int, T: int = 16, causal: bool = False, max_len: int = 64
) -> float:
    """Shuffle the tokens of an input to a one-layer attention; return |y(Px) - P y(x)| / |y(x)|.

    0 means the layer only permutes its outputs along with the inputs: it cannot see order.
    """
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1, T, dim, generator=g)
    perm = torch.randperm(T, generator=g)
    max_len = max(max_len, T)
    y = one_layer_attention(name, x, heads=heads, causal=causal, max_len=max_len)
    y_perm = one_layer_attention(name, x[:, perm], heads=heads, causal=causal, max_len=max_len)
    return float((y_perm - y[:, perm]).norm() / y.norm())


def permutation_test(name: str, *, dim: int, heads: int, max_len: int) -> Measure:
    try:
        change = permutation_change(name, dim=dim, heads=heads, max_len=max_len)
    except (ValueError, TypeError, NotImplementedError) as err:
        return na("permutation test", describe_error(err))
    sees = change > 1e-5
    verdict = "sees order" if sees else "blind to order"
    detail = (
        "one attention layer (no mask, fixed random weights, T = 16): "
        "|y(shuffled x) - shuffled y(x)| / |y(x)|"
    )
    return Measure("permutation test", change, verdict, sees, detail)
