"""posenc.analysis: each measured property on a case with a known answer."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
import posenc.explain
from posenc import analysis
from posenc import functional as PF

N, D = 64, 32


def sinusoid64(n: int = N, d: int = D) -> torch.Tensor:
    return PF.sinusoidal_table(torch.arange(n, dtype=torch.float64), d)


def built(name: str):
    """As `posenc explain` builds it (posenc.explain.build): train_len N, and max_len N (a hard
    limit) only where the encoding needs a length (a learned table, onehot's vector)."""
    return posenc.explain.build(name, dim=D, heads=4, max_pos=N)


def by_name(measures, name):
    return next(m for m in measures if m.name == name)


# ----------------------------------------------------------------------------- pure functions


def test_min_pairwise_distance_known():
    v = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])
    assert analysis.min_pairwise_distance(v) == (1.0, 0, 2)


def test_uniqueness_sinusoidal_unique_and_duplicates_not():
    m = analysis.uniqueness(sinusoid64())
    assert m.verdict == "unique" and m.good and m.value > 0.5
    dup = torch.randn(10, 4)
    dup[7] = dup[3]
    m = analysis.uniqueness(dup)
    assert m.verdict == "not unique" and m.value == pytest.approx(0.0, abs=1e-12)
    assert "between 3 and 7" in m.detail


def test_shift_invariance_sinusoidal_holds_to_1e6():
    pe = sinusoid64()
    assert analysis.shift_residual((pe @ pe.T)[None]) < 1e-6
    assert analysis.shift_invariance((pe @ pe.T)[None], what="<p_i, p_j>").good


def test_shift_invariance_random_learned_table_fails():
    torch.manual_seed(0)
    table = torch.randn(N, D, dtype=torch.float64)
    m = analysis.shift_invariance((table @ table.T)[None], what="<p_i, p_j>")
    assert m.verdict == "not shift-invariant" and m.value > 0.1


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=12, max_size=12))
def test_shift_residual_zero_for_any_toeplitz(values):
    f = torch.tensor(values, dtype=torch.float64)  # f(i - j), i - j in -5..6
    i = torch.arange(6)
    S = f[(i[:, None] - i[None, :]) + 5]
    assert analysis.shift_residual(S[None]) < 1e-12


def test_linear_relation_exact_for_sinusoidal_not_for_random():
    m = analysis.linear_relation(sinusoid64())
    assert m.good and m.value < 1e-6
    torch.manual_seed(0)
    m = analysis.linear_relation(torch.randn(N, 8, dtype=torch.float64))
    assert not m.good and m.value > 0.3
    assert analysis.linear_relation(torch.randn(8, 16)).verdict == "n/a"  # underdetermined


def test_su_bound_known_values():
    # all angles zero: |S_j| = j, so the bound is mean(1..n) = (n + 1) / 2
    assert analysis.su_bound(torch.zeros(3, 8))[0].item() == pytest.approx(4.5)
    inv = PF.sinusoidal_inv_freq(64, dtype=torch.float64)
    bound = analysis.su_bound(torch.arange(512, dtype=torch.float64)[:, None] * inv)
    assert analysis.decay(bound).verdict == "decays"
    assert analysis.decay(analysis.su_bound(torch.zeros(100, 8))).verdict == "no long-term decay"


def test_pair_angles_read_both_layouts_and_reject_learned():
    pe = sinusoid64()
    wl = analysis.wavelengths(analysis.pair_angles(pe))
    inv = PF.sinusoidal_inv_freq(D, dtype=torch.float64)
    torch.testing.assert_close(wl, 2 * math.pi / inv, rtol=1e-6, atol=0)
    halves = torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)  # [sin..., cos...]
    torch.testing.assert_close(analysis.wavelengths(analysis.pair_angles(halves)), wl)
    assert analysis.pair_angles(torch.randn(N, D)) is None


def test_boundedness_growth_rule():
    near = torch.ones(4)
    flat = [torch.full((3,), 2.0), torch.full((3,), 1.5), torch.full((3,), 2.0)]
    assert analysis.boundedness(near, flat, "far").verdict == "bounded"
    grow = [torch.full((3,), v) for v in (2.0, 3.0, 9.0)]
    assert analysis.boundedness(near, grow, "far").verdict == "unbounded"
    assert analysis.boundedness(near, None, "ValueError").verdict == "bounded (table)"


# ----------------------------------------------------------------------------- on encodings


@pytest.mark.parametrize(
    "name, verdict",
    [
        ("sinusoidal", "bounded"),
        ("index", "unbounded"),
        ("alibi", "unbounded"),
        ("t5", "bounded"),
        ("rope", "bounded"),
        ("learned", "bounded (table)"),
        ("nope", "bounded"),
    ],
)
def test_boundedness_of_encodings(name, verdict):
    ms = analysis.measure(built(name), name, dim=D, heads=4, max_pos=N, permutation=False)
    assert by_name(ms, "boundedness").verdict == verdict


@pytest.mark.parametrize(
    "name, invariant",
    [
        ("sinusoidal", True),
        ("rope", True),
        ("alibi", True),
        ("t5", True),
        ("learned", False),
        ("index", False),
    ],
)
def test_shift_invariance_of_encodings(name, invariant):
    ms = analysis.measure(built(name), name, dim=D, heads=4, max_pos=N, permutation=False)
    assert by_name(ms, "shift invariance").good is invariant


def test_uniqueness_of_distances_for_buckets():
    # Shaw clips distances at k: all distances >= k share one embedding
    ms = analysis.measure(built("shaw"), "shaw", dim=D, heads=4, max_pos=N, permutation=False)
    assert by_name(ms, "uniqueness").verdict == "not unique"
    ms = analysis.measure(built("alibi"), "alibi", dim=D, heads=4, max_pos=N, permutation=False)
    assert by_name(ms, "uniqueness").verdict == "unique"


def test_rope_decays_and_others_na():
    ms = analysis.measure(built("rope"), "rope", dim=D, heads=4, max_pos=N, permutation=False)
    assert by_name(ms, "long-term decay").verdict == "decays"
    ms = analysis.measure(built("alibi"), "alibi", dim=D, heads=4, max_pos=N, permutation=False)
    assert by_name(ms, "long-term decay").verdict == "n/a"


def test_permutation_zero_for_nope_nonzero_otherwise():
    assert analysis.permutation_change("nope", dim=D, heads=4) < 1e-5
    assert analysis.permutation_change("nope", dim=D, heads=4, causal=True) > 1e-3
    for name in ("sinusoidal", "rope", "alibi"):
        assert analysis.permutation_change(name, dim=D, heads=4) > 1e-2, name


def test_past_the_length():
    m = analysis.beyond_length(built("learned"), N, dim=D, heads=4)
    assert m.verdict == "error (clear)" and f"max_len={N}" in m.detail
    m = analysis.beyond_length(built("sinusoidal"), N, dim=D, heads=4)
    assert m.verdict == "defined, new"
    m = analysis.beyond_length(built("t5"), N, dim=D, heads=4)  # max_distance = train_len
    assert m.verdict == "defined, constant"
    m = analysis.beyond_length(built("alibi"), N, dim=D, heads=4)
    assert m.verdict == "defined"


def test_table_jump_and_periodicity_tell_smooth_tones_from_noise():
    jump, periodicity = analysis.measures.table_jump, analysis.measures.table_periodicity
    torch.manual_seed(0)
    tones = PF.sinusoidal_table(torch.arange(128), 64)
    noise = torch.randn(128, 64)
    assert jump(tones) < 0.5 < 1.2 < jump(noise) < 1.6
    assert periodicity(tones) > 0.7 > 0.2 > periodicity(noise)
    # scale-free, and a pure tone in every column is periodic whatever its phase
    assert jump(3 * noise) == pytest.approx(jump(noise))
    t = torch.arange(128, dtype=torch.float64)[:, None]
    phased = torch.cos(2 * torch.pi * 8 * t / 128 + torch.rand(1, 16) * 6)
    assert periodicity(phased) > 0.5
