"""Seed 004, continued: its formula, RoPE's debt to the sinusoid, the complex pairing, the number
of frequencies."""

from __future__ import annotations

import torch

from posenc import functional as PF
from posenc.explain.claims.base import CAVEAT, FAILS, HOLDS, Claim, Rule
from posenc.explain.claims.seed004 import SEED
from posenc.explain.claims.tools import sinusoid


def claim_004_formula(dim: int, n: int) -> Claim:
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)
    ang = pos / 10000.0 ** (two_i / dim)  # the seed's formula, float64
    written = torch.stack([ang.sin(), ang.cos()], -1).flatten(1)
    err = float((written - sinusoid(torch.arange(n), dim)).abs().max())
    return Claim(
        id="claim-004-formula",
        seed=SEED,
        quote=r"sin(\frac{pos}{10000.0^{2i / d}})",
        claim="PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).",
        about=("sinusoidal",),
        method=f"the formula in float64 against posenc.functional.sinusoidal_table, positions "
        f"0..{n - 1}, d = {dim}",
        result=f"max |difference| = {err:.1e}",
        measured={"max |difference|": err},
        rules=(Rule("max |difference|", ">", 1e-9, FAILS),),
        otherwise=HOLDS,
    )


def claim_004_rope_reuses(dim: int, n: int) -> Claim:
    rope = PF.rope_inv_freq(dim)[0].double()  # float32 frequencies, as transformers keeps them
    sin = PF.sinusoidal_inv_freq(dim, dtype=torch.float64)
    rel = float(((rope - sin) / sin).abs().max())
    return Claim(
        id="claim-004-rope-reuses",
        seed=SEED,
        quote="ROPE还是沿用了绝对位置中的很多思想",
        claim="RoPE reuses many ideas of the absolute (sinusoidal) encoding.",
        about=("rope", "sinusoidal"),
        method=f"RoPE's frequencies (rope_inv_freq) against the sinusoid's, d = {dim}",
        result=f"the same 10000^(-2i/d), to a relative {rel:.1e} (float32 rounding)",
        measured={"max relative difference": rel},
        rules=(Rule("max relative difference", ">", 1e-6, FAILS),),
        otherwise=HOLDS,
        note="The same frequencies and sin/cos pairs; RoPE rotates q and k by the angles where "
        "the sinusoid adds their sines and cosines to x.",
    )


def claim_004_complex_direction(dim: int, n: int) -> Claim:
    pe = sinusoid(torch.arange(2), dim)
    z = torch.complex(pe[:, 0::2], pe[:, 1::2])  # pairs read in order: sin + i cos
    turn = float(torch.angle(z[1] / z[0])[0])  # pair 0 (ω = 1): one position's turn
    return Claim(
        id="claim-004-complex-direction",
        seed=SEED,
        quote=r"\cos(\theta)+i \sin(\theta)",
        claim="Consecutive dims pair into complex numbers cos θ + i sin θ that rotate with the "
        "position.",
        about=("sinusoidal", "rope"),
        method="read each pair (p[2i], p[2i+1]) as p[2i] + i p[2i+1] and measure the angle it "
        "turns from position 0 to 1 (pair 0, ω = 1 rad per position)",
        result=f"{turn:+.3f} rad per position: the pair is sin θ + i cos θ, turning clockwise",
        measured={"turn per position (rad)": turn},
        rules=(Rule("turn per position (rad)", "<", 0, CAVEAT),),
        otherwise=HOLDS,
        note="They rotate, but the table puts sin first: as laid out each pair is sin θ + i cos "
        "θ = i e^(-iθ). Reading it as cos θ + i sin θ needs the pair swapped (RoPE's rotation "
        "matrix does not care: it acts on (x_2i, x_2i+1) with cos and sin of the same θ).",
    )


def claim_004_frequency_count(dim: int, n: int) -> Claim:
    count = int(PF.sinusoidal_inv_freq(512, dtype=torch.float64).unique().numel())
    return Claim(
        id="claim-004-frequency-count",
        seed=SEED,
        quote="那么我们就可以用256个不同的频率",
        claim="With d = 512 there are 256 different frequencies.",
        about=("sinusoidal",),
        method="distinct values of sinusoidal_inv_freq(512)",
        result=f"{count}",
        measured={"distinct frequencies - 256": count - 256},
        rules=(
            Rule("distinct frequencies - 256", "<", 0, FAILS),
            Rule("distinct frequencies - 256", ">", 0, FAILS),
        ),
        otherwise=HOLDS,
    )


CHECKS = [
    claim_004_formula,
    claim_004_rope_reuses,
    claim_004_complex_direction,
    claim_004_frequency_count,
]
