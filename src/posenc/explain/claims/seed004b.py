"""Seed 004, continued: its formula, RoPE's debt to the sinusoid, the complex pairing, the number
of frequencies."""

from __future__ import annotations

import torch

from posenc import functional as PF
from posenc.explain.claims.base import CAVEAT, FAILS, HOLDS, Measured, Rule, seed_claim
from posenc.explain.claims.tools import formula_error, sinusoid


@seed_claim(
    "inv-004-02",
    id="claim-004-formula",
    about=("sinusoidal",),
    rules=(Rule("max |difference|", ">", 1e-9, FAILS),),
    otherwise=HOLDS,
)
def claim_004_formula(dim: int, n: int) -> Measured:
    err = formula_error(torch.arange(n), dim)
    return Measured(
        method=f"the formula in float64 against posenc.functional.sinusoidal_table, positions "
        f"0..{n - 1}, d = {dim}",
        result=f"max |difference| = {err:.1e}",
        measured={"max |difference|": err},
    )


@seed_claim(
    "inv-004-01",
    id="claim-004-rope-reuses",
    about=("rope", "sinusoidal"),
    rules=(Rule("max relative difference", ">", 1e-6, FAILS),),
    otherwise=HOLDS,
)
def claim_004_rope_reuses(dim: int, n: int) -> Measured:
    rope = PF.rope_inv_freq(dim)[0].double()  # float32 frequencies, as transformers keeps them
    sin = PF.sinusoidal_inv_freq(dim, dtype=torch.float64)
    rel = float(((rope - sin) / sin).abs().max())
    return Measured(
        method=f"RoPE's frequencies (rope_inv_freq) against the sinusoid's, d = {dim}",
        result=f"the same 10000^(-2i/d), to a relative {rel:.1e} (float32 rounding)",
        measured={"max relative difference": rel},
        note="The same frequencies and sin/cos pairs; RoPE rotates q and k by the angles where "
        "the sinusoid adds their sines and cosines to x.",
    )


@seed_claim(
    "inv-004-03",
    id="claim-004-complex-direction",
    about=("sinusoidal", "rope"),
    rules=(Rule("turn per position (rad)", "<", 0, CAVEAT),),
    otherwise=HOLDS,
)
def claim_004_complex_direction(dim: int, n: int) -> Measured:
    pe = sinusoid(torch.arange(2), dim)
    z = torch.complex(pe[:, 0::2], pe[:, 1::2])  # pairs read in order: sin + i cos
    turn = float(torch.angle(z[1] / z[0])[0])  # pair 0 (ω = 1): one position's turn
    return Measured(
        method="read each pair (p[2i], p[2i+1]) as p[2i] + i p[2i+1] and measure the angle it "
        "turns from position 0 to 1 (pair 0, ω = 1 rad per position)",
        result=f"{turn:+.3f} rad per position: the pair is sin θ + i cos θ, turning clockwise",
        measured={"turn per position (rad)": turn},
        note="They rotate, but the table puts sin first: as laid out each pair is sin θ + i cos "
        "θ = i e^(-iθ). Reading it as cos θ + i sin θ needs the pair swapped (RoPE's rotation "
        "matrix does not care: it acts on (x_2i, x_2i+1) with cos and sin of the same θ).",
    )


@seed_claim(
    "inv-004-12",
    id="claim-004-frequency-count",
    about=("sinusoidal",),
    rules=(
        Rule("distinct frequencies - 256", "<", 0, FAILS),
        Rule("distinct frequencies - 256", ">", 0, FAILS),
    ),
    otherwise=HOLDS,
)
def claim_004_frequency_count(dim: int, n: int) -> Measured:
    count = int(PF.sinusoidal_inv_freq(512, dtype=torch.float64).unique().numel())
    return Measured(
        method="distinct values of sinusoidal_inv_freq(512)",
        result=f"{count}",
        measured={"distinct frequencies - 256": count - 256},
    )


@seed_claim(
    "inv-004-05",
    id="claim-004-clock-time",
    about=("sinusoidal", "rope"),
    rules=(
        Rule("closest two codes", "<=", 1e-6, FAILS),
        Rule("speed ratio", "<", 60, CAVEAT),
    ),
    otherwise=HOLDS,
)
def claim_004_clock_time(dim: int, n: int) -> Measured:
    w = PF.sinusoidal_inv_freq(dim, dtype=torch.float64)
    ratio = float(w[0] / w[1])  # how much faster each pair turns than the next
    pe = sinusoid(torch.arange(4096), dim)
    dist = torch.cdist(pe[:64], pe)  # does any later position come back to an early one?
    dist[torch.arange(64), torch.arange(64)] = float("inf")
    closest = float(dist.min())
    return Measured(
        method=f"speed ratio of neighbouring pairs (d = {dim}) against a clock's 60 and 60; the "
        "smallest distance between the code of one of positions 0..63 and any other of 0..4095",
        result=f"each pair turns x{ratio:.3f} faster than the next (a clock: x60, x60, x12, "
        f"repeating every 12 h); two codes at least {closest:.3f} apart",
        measured={"closest two codes": closest, "speed ratio": ratio},
        note="Tokens are told apart (no position returns to another's code, claim 000 unique), "
        "but the hands are not a clock's: neighbouring hands differ by 10000^(2/d) (x1.33 at "
        "d = 64), so many hands turn at similar speeds and none of them repeats the whole.",
    )


@seed_claim(
    "inv-004-10",
    id="claim-004-same-properties",
    about=("sinusoidal",),
    rules=(Rule("lowest ω, d=16 / d=512", ">", 1.5, CAVEAT),),
    otherwise=HOLDS,
)
def claim_004_same_properties(dim: int, n: int) -> Measured:
    rows = {}
    for d in (16, 64, 512):
        w = PF.sinusoidal_inv_freq(d, dtype=torch.float64)
        pe = sinusoid(torch.arange(256), d)
        gap = float(torch.nn.functional.pdist(pe).min())  # closest two positions
        rows[d] = (float(w.min()), float(w[0] / w[1]), gap)
    lows = [r[0] for r in rows.values()]
    shown = "; ".join(f"d = {d}: lowest ω {lo:.1e}, ratio {r:.3f}, closest {g:.2f}"
                      for d, (lo, r, g) in rows.items())  # fmt: skip
    return Measured(
        method="lowest frequency, speed ratio of neighbouring pairs and the smallest distance "
        "between two of positions 0..255, for d = 16, 64, 512",
        result=shown,
        measured={"lowest ω, d=16 / d=512": lows[0] / lows[-1]},
        note="The highest frequency is 1 and the range of exponents [0, 1) for every d, but "
        "the lowest frequency (10000^(-(d-2)/d)), the spacing of the pairs (10000^(2/d)) and "
        "how far apart positions sit all change with d.",
    )


CHECKS = [
    claim_004_formula,
    claim_004_rope_reuses,
    claim_004_complex_direction,
    claim_004_frequency_count,
    claim_004_clock_time,
    claim_004_same_properties,
]
