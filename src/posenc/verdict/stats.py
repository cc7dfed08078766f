"""95% intervals for numbers that are samples: bootstrap(values, stat), mean(values) (Student's
t for few values), wilson(k, n) for a rate. The bootstrap is seeded from the values, so a report
regenerates to the same text."""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054  # the 97.5% point of the standard normal
RESAMPLES = 2000
SMALL = 20  # fewer values: Student's t interval for a mean


@dataclass(frozen=True)
class Interval:
    value: float
    lo: float
    hi: float
    n: int

    def separated(self, other: Interval) -> bool:
        """The two 95% intervals do not overlap."""
        return self.hi < other.lo or other.hi < self.lo

    def map(self, fn: Callable[[float], float]) -> Interval:
        """fn applied to the value and both ends (fn increasing)."""
        return Interval(fn(self.value), fn(self.lo), fn(self.hi), self.n)


def _finite(values, name: str) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError(f"{name}: needs at least one value")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: values must be finite numbers (no NaN or inf)")
    return x


def bootstrap(values: Sequence[float], stat: Callable[[np.ndarray], np.ndarray] | None = None,
              resamples: int = RESAMPLES) -> Interval:  # fmt: skip
    """stat (default: the mean, taken along the last axis of [resamples, n]) and its 95%
    percentile-bootstrap interval over the n values; one value gives lo = hi = the value."""
    x = _finite(values, "bootstrap")
    stat = stat or (lambda a: a.mean(axis=-1))
    value = float(stat(x[None])[0])
    if x.size == 1:
        return Interval(value, value, value, 1)
    seed = int.from_bytes(hashlib.sha1(x.tobytes()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    draws = stat(x[rng.integers(0, x.size, size=(resamples, x.size))])
    lo, hi = np.quantile(draws, [0.025, 0.975])
    return Interval(value, float(min(lo, value)), float(max(hi, value)), int(x.size))


@functools.lru_cache(maxsize=64)
def t95(df: int) -> float:
    """The 97.5% point of Student's t with `df` degrees of freedom (bisection on its CDF,
    integrated by Simpson's rule on x = tan(u), which maps the heavy tail to a finite range)."""
    if not isinstance(df, int) or df < 1:
        raise ValueError(f"t95: df must be a whole number >= 1, got {df!r}")
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(x: float) -> float:  # 0.5 + integral over [0, x] of the density
        u = np.linspace(0.0, math.atan(x), 2001)
        f = c * (1 + np.tan(u) ** 2 / df) ** (-(df + 1) / 2) / np.cos(u) ** 2
        return 0.5 + (u[1] - u[0]) / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())

    lo, hi = Z95, 100.0  # t95(1) = 12.7
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < 0.975 else (lo, mid)
    return (lo + hi) / 2


def mean(values: Sequence[float]) -> Interval:
    """The mean and its 95% interval: Student's t below SMALL values (a bootstrap of a few spans
    little more than their range), else the bootstrap; one value: lo = hi = the value."""
    x = _finite(values, "mean")
    if x.size == 1 or x.size >= SMALL:
        return bootstrap(x)
    m, half = float(x.mean()), t95(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return Interval(m, m - half, m + half, int(x.size))


def wilson(k: float, n: int) -> Interval:
    """The rate k / n and its 95% Wilson score interval."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"wilson: n must be a whole number >= 1, got {n!r}")
    if not (isinstance(k, (int, float, np.number)) and math.isfinite(k) and 0 <= k <= n):
        raise ValueError(f"wilson: k must be a number in [0, n={n}], got {k!r}")
    p, z2 = k / n, Z95**2
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Interval(p, min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half)), int(n))
