"""Measured properties of positional encodings: each a number with a verdict.

Two layers. Pure functions on tensors (a table of position vectors `[T, F]`, a score matrix
`[H, Tq, Tk]`, rotary angles `[T, R/2]`) that the tests check on cases with known answers; and
probes that get those tensors out of any registered encoding through its hooks (posenc.base):

    absolute  vector of position t      = embed(zeros, t)            (the added/concatenated part)
    rotary    vector of position t      = [q_t, k_t], a fixed q = k = ones / sqrt(Dh) rotated to t
    score of (query i, key j)           = <v_i, v_j> for absolute and rotary; bias(q0, k0, i, j)
                                          for bias / relative (q0, k0 one fixed random vector)

Modules:
    measures  Measure; uniqueness, boundedness, shift invariance, linear relation on tensors
    angles    RoPE decay bound (su_bound, decay), pair_angles, wavelengths
    probes    position_vectors, scores, attention_weights, score_vs_distance; past-the-length,
              permutation test
    here      measure(): every property of one built encoding, in page order
"""

from __future__ import annotations

import torch

from posenc.analysis.angles import decay, pair_angles, su_bound, wavelengths
from posenc.analysis.measures import (
    SHIFT_TOL,
    Measure,
    boundedness,
    linear_relation,
    linear_residual,
    min_pairwise_distance,
    na,
    shift_invariance,
    shift_residual,
    uniqueness,
)
from posenc.analysis.probes import (
    attention_weights,
    beyond_length,
    describe_error,
    permutation_change,
    permutation_test,
    position_vectors,
    score_label,
    score_vs_distance,
    scores,
)
from posenc.base import PositionalEncoding

__all__ = ["SHIFT_TOL", "Measure", "attention_weights", "beyond_length", "boundedness", "decay",
           "describe_error", "linear_relation", "linear_residual", "measure",
           "min_pairwise_distance", "na", "pair_angles", "permutation_change", "permutation_test",
           "position_vectors", "score_label", "score_vs_distance", "scores", "shift_invariance",
           "shift_residual", "su_bound", "uniqueness", "wavelengths"]  # fmt: skip


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
    what = "<p_i, p_j>" if "embed" in enc.provides else "bias(i, j)"
    what = "<R_i q, R_j k>" if "angles" in enc.provides else what
    out.append(shift_invariance(S, what=what))
    if vectors is not None:  # rotary: the rotated query alone (q and k rotate alike)
        out.append(linear_relation(vectors[:, :dim] if "angles" in enc.provides else vectors))
    else:
        out.append(na("linear relation", "no position vectors (the encoding acts on scores)"))
    angles = enc.angles(torch.arange(4 * max_pos)) if enc.position_dims == 1 else None
    if angles is not None:
        out.append(decay(su_bound(angles.float())))
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
