"""Measurements on rotation angles [T, R/2]: Su et al.'s RoPE decay bound, reading a table as
sin / cos pairs turning with position, and the wavelengths of those pairs."""

from __future__ import annotations

import math

import torch

from posenc.analysis.measures import Measure


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
    detail = (
        f"Su et al.'s upper bound (1/(R/2))·Σ_j |Σ_(i<j) e^(i k θ_i)|: mean over distances "
        f"{3 * K // 4}..{K - 1} divided by its value at distance 0"
    )
    return Measure("long-term decay", ratio, "decays" if ok else "no long-term decay", ok, detail)


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
