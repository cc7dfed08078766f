"""Section `precision`: what accurate angles (float64, whole turns dropped) cost against float32
products, timed alternately on the sinusoidal table [T, D] and RoPE of q, k [1, H, T, Dh], with
each one's largest error against float64 at positions 10^3 .. 2^31 - 1.
"""

from __future__ import annotations

from functools import partial

import torch

from posenc import kernels
from posenc.bench.common import Sizes, timeit_many
from posenc.bench.report import Report, Row
from posenc.functional import rope_align, rope_inv_freq, sinusoidal_inv_freq, sinusoidal_table
from posenc.functional.rotary import _rope_qk_fast  # q and k in one call (one Triton launch)

ERROR_AT = (10**3, 10**5, 10**6, 10**7, 2**24 + 1, 2**31 - 1)


def product_table(pos: torch.Tensor, dim: int) -> torch.Tensor:
    """The sinusoidal table from float32 products: pos [T] -> [T, dim]."""
    angles = pos.float()[:, None] * sinusoidal_inv_freq(dim, dtype=torch.float64).float()
    return torch.stack((angles.sin(), angles.cos()), -1).flatten(-2)[:, :dim]


def product_rope(q, k, pos, inv):
    """RoPE of q, k with cos / sin of float32 products, rotated by the same kernel."""
    angles = pos.float()[:, None] * inv  # [T, Dh/2]
    cs = tuple(rope_align(t, q, "positions") for t in (angles.cos(), angles.sin()))
    return kernels._rotate_qk(q, k, cs, cs, "half")


def largest_error(fn, reference, device: str) -> float:
    """max |fn(pos) - reference(pos)| over 8 positions ending at each of ERROR_AT."""
    worst = 0.0
    for p in ERROR_AT:
        pos = torch.arange(p - 7, p + 1, device=device)
        worst = max(worst, float((fn(pos).double() - reference(pos)).abs().max()))
    return worst


def ours_rope(q, k, pos, inv):
    return _rope_qk_fast(q, k, pos, None, inv)


PAIRS = {"table": (sinusoidal_table, product_table), "rope": (ours_rope, product_rope)}


def bench_precision(rep: Report, s: Sizes, device: str) -> float:
    """Rows "precision"; returns the largest cost ratio posenc / float32 products."""
    torch.manual_seed(0)
    inv = rope_inv_freq(s.Dh)[0].to(device)  # [Dh/2]
    D = s.table_dim
    q64, k64 = torch.randn(2, 1, s.H, 8, s.Dh, device=device, dtype=torch.float64)  # probes
    q32, k32 = q64.float(), k64.float()

    def table_error(table) -> float:
        return largest_error(
            lambda p: table(p, D), lambda p: sinusoidal_table(p.double(), D), device
        )

    def rope_error(rope) -> float:
        exact = lambda p: ours_rope(q64, k64, p, inv)[0]  # noqa: E731 - float64 throughout
        return largest_error(lambda p: rope(q32, k32, p, inv)[0], exact, device)

    error_of = {"table": table_error, "rope": rope_error}
    errors = {what: [error_of[what](fn) for fn in fns] for what, fns in PAIRS.items()}
    worst = 0.0
    for T in s.precision_T:
        pos = torch.arange(T, device=device)  # [T]
        q = torch.randn(1, s.H, T, s.Dh, device=device)  # [1, H, T, Dh]
        k = torch.randn_like(q)
        cases = {  # what -> (case, the arguments of its PAIRS)
            "table": (f"sin table T={T} D={D}", (pos, D)),
            "rope": (f"rope q,k [1,{s.H},{T},{s.Dh}]", (q, k, pos, inv)),
        }
        for what, (case, args) in cases.items():
            calls = {i: partial(fn, *args) for i, fn in enumerate(PAIRS[what])}
            ms = list(timeit_many(calls, device, s.repeats, s.warmup).values())
            worst = max(worst, ms[0] / ms[1])
            impls = ("posenc (float64-reduced angles)", "float32 products")
            for impl, t, e in zip(impls, ms, errors[what], strict=True):
                note = f"max |error| vs float64 at 10^3..2^31: {e:.1e}"
                rep.rows.append(Row("precision", case, impl, t, t / ms[0], note=note))
    return worst
