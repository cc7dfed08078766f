"""posenc.verdict.stats: the bootstrap and Wilson intervals against their definitions."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.verdict import stats


def test_wilson_matches_its_closed_form_and_known_values():
    r = stats.wilson(3, 6)  # the example: 3 of 6 spans about 0.19..0.81
    assert (r.value, r.n) == (0.5, 6)
    assert r.lo == pytest.approx(0.1876, abs=1e-4) and r.hi == pytest.approx(0.8124, abs=1e-4)
    z = 1.959963984540054
    for k, n in ((0, 10), (10, 10), (37, 100)):
        p = k / n
        c = (p + z * z / (2 * n)) / (1 + z * z / n)
        h = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        got = stats.wilson(k, n)
        assert got.lo == pytest.approx(max(0, c - h)) and got.hi == pytest.approx(min(1, c + h))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_the_rate_within_0_and_1(kn):
    r = stats.wilson(*kn)
    assert 0 <= r.lo <= r.value <= r.hi <= 1


def test_the_bootstrap_is_seeded_and_covers_the_mean():
    x = np.random.default_rng(0).normal(2.0, 1.0, 200)
    a, b = stats.bootstrap(x), stats.bootstrap(list(x))
    assert a == b  # deterministic: the same values, the same interval
    assert a.lo < x.mean() < a.hi and a.n == 200
    half = 1.96 * x.std(ddof=1) / math.sqrt(200)  # the normal interval, for a mean of 200
    assert a.hi - a.lo == pytest.approx(2 * half, rel=0.15)
    one = stats.bootstrap([3.0])
    assert (one.value, one.lo, one.hi, one.n) == (3.0, 3.0, 3.0, 1)


@pytest.mark.parametrize("df", [1, 2, 4, 9, 30])
def test_t95_is_the_975_point_of_students_t(df):
    """P(T <= t95) = 0.975 for T = Z / sqrt(chi2_df / df), by simulation (5e5 draws)."""
    rng = np.random.default_rng(df)
    z, chi2 = rng.standard_normal(500_000), rng.chisquare(df, 500_000)
    assert np.mean(z / np.sqrt(chi2 / df) <= stats.t95(df)) == pytest.approx(0.975, abs=2e-3)


@pytest.mark.parametrize("n", [2, 3, 5, 12])
def test_the_mean_interval_covers_95_percent_of_small_samples(n):
    """Over 4000 normal samples of n values, the interval holds the true mean ~95% of the time
    (a percentile bootstrap of 2-5 values holds it far less often)."""
    rng = np.random.default_rng(n)
    hits = sum(r.lo <= 0.0 <= r.hi for r in map(stats.mean, rng.normal(0.0, 1.0, (4000, n))))
    assert hits / 4000 == pytest.approx(0.95, abs=0.015)
    assert stats.mean([3.0]) == stats.Interval(3.0, 3.0, 3.0, 1)
    x = rng.normal(0.0, 1.0, stats.SMALL)  # from SMALL values on: the bootstrap
    assert stats.mean(x) == stats.bootstrap(x)


def test_separated_and_map():
    a, b = stats.Interval(1.0, 0.9, 1.1, 5), stats.Interval(1.3, 1.15, 1.4, 5)
    assert a.separated(b) and b.separated(a)
    assert not a.separated(stats.Interval(1.2, 1.05, 1.3, 5))
    assert a.map(math.exp).lo == pytest.approx(math.exp(0.9))


@pytest.mark.parametrize(("fn", "args", "match"), [
    (stats.wilson, (7, 6), "k must be"), (stats.wilson, (1, 0), "n must be"),
    (stats.wilson, (math.nan, 6), "k must be"), (stats.wilson, (1, 2.5), "n must be"),
    (stats.bootstrap, ([],), "at least one"),
    (stats.bootstrap, ([1.0, math.nan],), "finite"), (stats.mean, ([],), "at least one"),
    (stats.t95, (0,), "df must be")])  # fmt: skip
def test_bad_input_names_the_parameter(fn, args, match):
    with pytest.raises(ValueError, match=match):
        fn(*args)
