"""Measured properties of positional encodings: each a number with a verdict.

Two layers. Pure functions on tensors (a table of position vectors `[T, F]`, a score matrix
`[H, Tq, Tk]`, rotary angles `[T, R/2]`) that the tests check on cases with known answers; and
probes that get those tensors out of any registered encoding through its hooks (posenc.base):

    absolute  vector of position t      = embed(zeros, t)            (the added/concatenated part)
    rotary    vector of position t      = [q_t, k_t], a fixed q = k = ones / sqrt(Dh) rotated to t
    score of (query i, key j)           = <v_i, v_j> for absolute and rotary; bias(q0, k0, i, j)
                                          for bias / relative (q0, k0 one fixed random vector)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

import posenc
from posenc.base import PositionalEncoding

SHIFT_TOL = 1e-4  # relative residual under which a score counts as shift-invariant
LINEAR_TOL = 1e-4  # relative residual under which PE(t+k) = PE(t) M_k counts as exact


@dataclass
class Measure:
    """One measured property: a number, a short verdict, and how it was measured."""

    name: str
    value: float | None
    verdict: str
    good: bool | None = None  # True: a desirable property holds; False: it fails; None: n/a
    detail: str = ""

    def line(self) -> str:
        value = "-" if self.value is None else f"{self.value:.4g}"
        return f"{self.name:<18} {value:>10}  {self.verdict}"


def na(name: str, why: str) -> Measure:
    return Measure(name, None, "n/a", None, why)


# ----------------------------------------------------------------------- pure measurements


def min_pairwise_distance(vectors: torch.Tensor) -> tuple[float, int, int]:
    """vectors [T, F] -> (smallest L2 distance between two rows, i, j) in float64."""
    v = vectors.double()
    sq = (v * v).sum(-1)
    d2 = (sq[:, None] + sq[None, :] - 2 * v @ v.T).clamp_min(0)
    d2.fill_diagonal_(float("inf"))
    flat = int(torch.argmin(d2))
    i, j = divmod(flat, d2.shape[1])
    # recompute the winner exactly (the Gram trick loses digits for near-equal rows)
    return float((v[i] - v[j]).norm()), min(i, j), max(i, j)


def uniqueness(vectors: torch.Tensor, *, what: str = "positions") -> Measure:
    """Smallest distance between any two rows, relative to the typical row norm."""
    if vectors.shape[0] < 2:
        return na("uniqueness", "needs at least two positions")
    dist, i, j = min_pairwise_distance(vectors)
    scale = max(float(vectors.double().norm(dim=-1).median()), 1e-12)
    unique = dist > 1e-6 * max(scale, 1.0)
    verdict = "unique" if unique else "not unique"
    detail = (
        f"smallest L2 distance between the vectors of two {what} 0..{vectors.shape[0] - 1}: "
        f"{dist:.4g} (between {i} and {j}; median norm {scale:.3g})"
    )
    return Measure("uniqueness", dist, verdict, unique, detail)


def boundedness(near: torch.Tensor, far: list[torch.Tensor] | None, far_label: str) -> Measure:
    """Largest |value| inside the range against windows ever further out (`far`, in order).

    Unbounded when the maxima of the far windows keep growing, by 10% or more from each
    window to the next (linear, logarithmic or exponential growth all do). A bounded
    oscillation (sandwich) may exceed the in-range max but does not grow window after window.
    """
    near_max = float(near.double().abs().max()) if near.numel() else 0.0
    if far is None:
        detail = f"max |value| = {near_max:.4g} inside the table; past it: {far_label}"
        return Measure("boundedness", near_max, "bounded (table)", True, detail)
    maxima = [float(w.double().abs().max()) for w in far]
    growing = all(b > 1.1 * a for a, b in zip(maxima, maxima[1:]))
    bounded = not growing and all(math.isfinite(m) for m in maxima)
    top = max([near_max] + maxima)
    detail = (
        f"max |value| {near_max:.4g} within the range; "
        + ", ".join(f"{m:.4g}" for m in maxima)
        + f" at {far_label}"
    )
    return Measure("boundedness", top, "bounded" if bounded else "unbounded", bounded, detail)


def shift_residual(scores: torch.Tensor, max_offset: int | None = None) -> float:
    """scores [H, T, T] (query i, key j) -> max over distances k = i - j >= 0 of the spread
    (max - min over i) of scores[h, i, i - k], relative to max |score|."""
    s = scores.double()
    T = s.shape[-1]
    K = T // 2 if max_offset is None else min(max_offset, T - 1)
    scale = float(s.abs().max())
    if scale == 0:
        return 0.0
    worst = 0.0
    for k in range(K + 1):
        diag = torch.diagonal(s, offset=-k, dim1=-2, dim2=-1)  # [H, T - k]
        worst = max(worst, float((diag.max(-1).values - diag.min(-1).values).max()))
    return worst / scale


def shift_invariance(scores: torch.Tensor, *, what: str) -> Measure:
    """Does score(i, i - k) depend on k alone?"""
    if float(scores.abs().max()) == 0:
        return Measure("shift invariance", 0.0, "trivial (no signal)", None, "all scores are 0")
    r = shift_residual(scores)
    ok = r < SHIFT_TOL
    verdict = "shift-invariant" if ok else "not shift-invariant"
    detail = (
        f"{what}: largest spread of score(i, i - k) over i, for each distance k, "
        f"relative to max |score| (T = {scores.shape[-1]})"
    )
    return Measure("shift invariance", r, verdict, ok, detail)


def linear_residual(vectors: torch.Tensor, k: int) -> float | None:
    """Relative residual of the least-squares fit PE[t + k] = PE[t] @ M_k; None when the fit is
    underdetermined (fewer equations than unknowns)."""
    v = vectors.double()
    a, b = v[:-k], v[k:]
    if a.shape[0] <= a.shape[1] + 1:
        return None
    m = torch.linalg.lstsq(a, b, rcond=1e-10, driver="gelsd").solution  # SVD: rank-safe
    return float((a @ m - b).norm() / b.norm().clamp_min(1e-300))


def linear_relation(vectors: torch.Tensor, offsets=(1, 8)) -> Measure:
    """PE(t + k) = M_k PE(t): the worst relative residual over the offsets."""
    res = [linear_residual(vectors, k) for k in offsets]
    if any(r is None for r in res):
        return na(
            "linear relation",
            f"{vectors.shape[1]} features need more than {vectors.shape[1] + 1} positions",
        )
    worst = max(res)
    ok = worst < LINEAR_TOL
    verdict = "exact" if ok else "no exact map"
    detail = (
        f"least-squares M_k for k in {list(offsets)}; residual |PE[t+k] - PE[t] M_k| / |PE[t+k]|"
    )
    return Measure("linear relation", worst, verdict, ok, detail)


def su_bound(angles: torch.Tensor) -> torch.Tensor:
    """Su et al. (2021) §3.4.3 relative upper bound of the RoPE score at each distance.

    angles [T, R/2] (the rotation angle of each pair at distance t) -> [T]:
    (1 / (R/2)) * sum_j |S_j|, S_j = sum_{i < j} exp(i * angle_i), j = 1..R/2.
    """
    z = torch.polar(torch.ones_like(angles.double()), angles.double())  # [T, R/2]
    return z.cumsum(-1).abs().mean(-1)


def decay(curve: torch.Tensor) -> Measure:
    """Long-term decay of a score curve [K] over distance: mean of the far quarter / value at 0."""
    K = curve.shape[0]
    ratio = float(curve[3 * K // 4 :].abs().mean() / curve[0].abs().clamp_min(1e-300))
    ok = ratio < 0.5
    verdict = "decays" if ok else "no long-term decay"
    detail = (
        f"Su et al.'s upper bound (1/(R/2))·Σ_j |Σ_(i<j) e^(i k θ_i)|: mean over distances "
        f"{3 * K // 4}..{K - 1} divided by its value at distance 0"
    )
    return Measure("long-term decay", ratio, verdict, ok, detail)


def pair_angles(vectors: torch.Tensor, rtol: float = 1e-3) -> torch.Tensor | None:
    """Read a table [T, F] as sin/cos pairs turning with position: -> unwrapped angles
    [T, F // 2], or None when no layout fits (learned tables, one-hot, ...).

    Tries interleaved pairs (2i, 2i+1), then halves (i, i + F/2); a layout fits when every
    pair keeps a constant nonzero radius over positions. Angle = atan2(sin, cos).
    """
    v = vectors.double()
    T, F = v.shape
    if T < 2 or F < 2:
        return None
    for s, c in (
        (v[:, 0 : F - F % 2 : 2], v[:, 1::2]),
        (v[:, : F // 2], v[:, F // 2 : 2 * (F // 2)]),
    ):
        r = torch.sqrt(s * s + c * c)
        if float(r.min()) > 0 and float((r - r[:1]).abs().max()) <= rtol * float(r.max()):
            a = torch.atan2(s, c)
            step = torch.diff(a, dim=0)
            step = step - 2 * math.pi * torch.round(step / (2 * math.pi))  # unwrap
            return torch.cat([a[:1], a[:1] + step.cumsum(0)])
    return None


def wavelengths(angles: torch.Tensor) -> torch.Tensor:
    """angles [T, n] of positions 0..T-1 -> [n] wavelength 2*pi / (angle per position),
    the slope fitted by least squares."""
    a = angles.double()
    t = torch.arange(a.shape[0], dtype=torch.float64)
    tc = t - t.mean()
    slope = (tc[:, None] * (a - a.mean(0))).sum(0) / (tc * tc).sum()
    return 2 * math.pi / slope.abs()


# ---------------------------------------------------------------------------------- probes


def lay_out(enc: PositionalEncoding, positions: torch.Tensor) -> torch.Tensor:
    """[T] -> the positions the encoding takes: for 2-D / 3-D ones the diagonal (t, t[, t])
    [T, P], so an offset k in t is the same offset (k, k) everywhere."""
    P = enc.position_dims
    return positions if P == 1 else positions[:, None].expand(-1, P).contiguous()


@torch.no_grad()
def position_vectors(enc: PositionalEncoding, positions: torch.Tensor, *, dim: int):
    """What the encoding attaches to each position, [T, F] float64; None for score encodings.

    absolute: embed(zeros) (for concatenating encodings the zeros of x come along);
    rotary: a fixed query and key ones(Dh) / sqrt(Dh) rotated to each position, [T, 2 Dh]
    (they differ for xPos, which scales q and k apart).
    """
    pos = lay_out(enc, positions)
    T = len(positions)
    if enc.family == "absolute":
        return enc.embed(torch.zeros(1, T, dim), pos)[0].double()
    if enc.family == "rotary":
        q = torch.full((1, 1, T, dim), dim**-0.5)
        q, k = enc.rotate(q, q, pos, pos)
        return torch.cat([q[0, 0], k[0, 0]], dim=-1).double()
    return None


def _fixed_qk(dim: int, heads: int, tq: int, tk: int):
    g = torch.Generator().manual_seed(0)
    q0, k0 = torch.randn(2, dim, generator=g)
    return q0.expand(1, heads, tq, dim), k0.expand(1, heads, tk, dim)


@torch.no_grad()
def scores(
    enc: PositionalEncoding, q_pos: torch.Tensor, k_pos: torch.Tensor, *, dim: int, heads: int
) -> torch.Tensor:
    """The positional score of (query i, key j), [H or 1, Tq, Tk] float64.

    absolute / rotary: <v_i, v_j> of position_vectors; bias / relative: bias() with one fixed
    random q0 and k0 at every position (so only positions vary); no encoding: zeros.
    """
    if enc.family in ("absolute", "rotary"):
        if enc.family == "rotary":
            q = torch.full((1, 1, len(q_pos), dim), dim**-0.5)
            k = torch.full((1, 1, len(k_pos), dim), dim**-0.5)
            q, k = enc.rotate(q, k, lay_out(enc, q_pos), lay_out(enc, k_pos))
            return (q[0] @ k[0].transpose(-1, -2)).double()
        vq = position_vectors(enc, q_pos, dim=dim)
        vk = position_vectors(enc, k_pos, dim=dim)
        return (vq @ vk.T)[None]
    if enc.has_bias:
        q, k = _fixed_qk(dim, heads, len(q_pos), len(k_pos))
        b = enc.bias(q, k, lay_out(enc, q_pos), lay_out(enc, k_pos))
        if b is not None:
            return b[0].double()
    return torch.zeros(1, len(q_pos), len(k_pos), dtype=torch.float64)


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
    limit = getattr(enc, "max_len", None) or n
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
    enc = posenc.build(name, dim=D, heads=heads, head_dim=D // heads, max_len=max_len).eval()
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
    if not hasattr(posenc, "attention"):
        return na("permutation test", "posenc.attention is not available yet")
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


# ------------------------------------------------------------------------------ everything


def measure(
    enc: PositionalEncoding,
    name: str,
    *,
    dim: int,
    heads: int,
    max_pos: int,
    permutation: bool = True,
) -> list[Measure]:
    """Every property of one built encoding (built with max_len=max_pos), in page order.

    The permutation test builds fresh encodings by `name` (skip it for trained ones).
    """
    pos = torch.arange(max_pos)
    out: list[Measure] = []
    vectors = position_vectors(enc, pos, dim=dim)
    curve = None
    if vectors is not None:
        out.append(uniqueness(vectors))
    else:
        curve = score_vs_distance(enc, max_pos, dim=dim, heads=heads)  # [H, N]
        if float(curve.abs().max()) == 0:
            out.append(na("uniqueness", "no positional signal at all"))
        else:
            out.append(uniqueness(curve.T, what="distances"))
    out.append(_boundedness(enc, vectors, curve, dim=dim, heads=heads, n=max_pos))
    S = scores(enc, pos, pos, dim=dim, heads=heads)
    what = {"absolute": "<p_i, p_j>", "rotary": "<R_i q, R_j k>"}.get(enc.family, "bias(i, j)")
    out.append(shift_invariance(S, what=what))
    if vectors is not None:  # rotary: the rotated query alone (q and k rotate alike)
        out.append(linear_relation(vectors[:, :dim] if enc.family == "rotary" else vectors))
    else:
        out.append(na("linear relation", "no position vectors (the encoding acts on scores)"))
    if enc.family == "rotary" and enc.position_dims == 1 and hasattr(enc, "angles"):
        out.append(decay(su_bound(enc.angles(torch.arange(4 * max_pos)).float())))
    else:
        out.append(na("long-term decay", "defined for rotary encodings (Su et al. 2021)"))
    if permutation:
        out.append(permutation_test(name, dim=dim, heads=heads, max_len=max_pos))
    out.append(beyond_length(enc, max_pos, dim=dim, heads=heads))
    return out


def _boundedness(enc, vectors, curve, *, dim, heads, n) -> Measure:
    starts = [4 * n, 32 * n, 256 * n, 2048 * n]
    label = ", ".join(f"{s}..{s + 31}" for s in starts)
    try:
        if vectors is not None:
            far = [position_vectors(enc, torch.arange(s, s + 32), dim=dim) for s in starts]
            return boundedness(vectors, far, f"positions {label}")
        keys = torch.arange(32)
        far = [scores(enc, torch.tensor([s + 31]), keys, dim=dim, heads=heads) for s in starts]
        return boundedness(curve, far, f"distances {label}")
    except (ValueError, IndexError) as err:
        return boundedness(vectors if vectors is not None else curve, None, describe_error(err))
