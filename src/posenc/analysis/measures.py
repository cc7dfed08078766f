"""Pure measurements on tensors, each checked by the tests on cases with known answers:
a table of position vectors [T, F] (uniqueness, boundedness, linear relation) and a score
matrix [H, Tq, Tk] (shift invariance). Each property comes back as a Measure."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

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
    detail = (
        f"smallest L2 distance between the vectors of two {what} 0..{vectors.shape[0] - 1}: "
        f"{dist:.4g} (between {i} and {j}; median norm {scale:.3g})"
    )
    return Measure("uniqueness", dist, "unique" if unique else "not unique", unique, detail)


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
    detail = (
        f"least-squares M_k for k in {list(offsets)}; residual |PE[t+k] - PE[t] M_k| / |PE[t+k]|"
    )
    return Measure("linear relation", worst, "exact" if ok else "no exact map", ok, detail)


def table_jump(table: torch.Tensor) -> float:
    """How far a table [T, F] moves from one row to the next, relative to its rows' size:
    mean_t |p_(t+1) - p_t| / mean_t |p_t|. Smooth curves are small (a sinusoid of d = 64 over
    64 rows: ~0.2); independent random rows ~1.4 (sqrt 2)."""
    t = table.double()
    step = (t[1:] - t[:-1]).norm(dim=-1).mean()
    return float(step / t.norm(dim=-1).mean().clamp_min(1e-300))


def table_periodicity(table: torch.Tensor) -> float:
    """The mean over columns of the share of a column's spectral power (over t, mean removed)
    in its largest frequency bin, the window being Hann: ~1 for pure tones, low for noise (the
    expected largest of T/2 exponential shares, ~ln(T/2) / (T/2))."""
    t = table.double()
    t = (t - t.mean(dim=0)) * torch.hann_window(t.shape[0], periodic=False, dtype=t.dtype)[:, None]
    power = torch.fft.rfft(t, dim=0).abs().square()[1:]  # [T/2, F], the constant bin dropped
    share = power.max(dim=0).values / power.sum(dim=0).clamp_min(1e-300)
    return float(share.mean())
