"""Seed 000 (Vaswani et al.'s sinusoidal encoding): its three requirements, wavelengths, code."""

from __future__ import annotations

import math

import torch

from posenc import analysis
from posenc import functional as PF
from posenc.encodings import build
from posenc.explain.claims.base import seed_claim
from posenc.explain.claims.tools import dot_residual, run_seed, sinusoid
from posenc.verdict import CAVEAT, FAILS, Measured, Rule, Table

SEED = "000_e2b8049db0aa593d.txt"
CHECKS: list = []  # its checks in page order (seed_claim appends each)

CODE = """\
class PositionalEncoding(nn.Module):

    def __init__(self, d_model, max_len=5000):
        super(PositionalEncoding, self).__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        #pe.requires_grad = False
        self.register_buffer('pe', pe)

    def forward(self, x):
        return x + self.pe[:x.size(0), :]
"""


@seed_claim("inv-000-07", id="claim-000-unique", about=("sinusoidal",),
            rules=(Rule("min_distance / norm", "<=", 1e-6, FAILS),))  # fmt: skip
def claim_000_unique(dim: int, n: int) -> Measured:
    far = 4096
    pe = sinusoid(torch.arange(far), dim)
    m = analysis.uniqueness(pe)
    scale = max(float(pe.norm(dim=-1).median()), 1.0)
    return Measured(
        method=f"smallest L2 distance between the d = {dim} sinusoidal vectors of any two "
        f"positions 0..{far - 1}",
        result=m.detail,
        measured={"min_distance / norm": m.value / scale},
    )


@seed_claim("inv-000-08", id="claim-000-consistent", about=("sinusoidal",),
            rules=(Rule("spread", ">=", analysis.SHIFT_TOL, FAILS),))  # fmt: skip
def claim_000_consistent(dim: int, n: int) -> Measured:
    pe = sinusoid(torch.arange(n), dim)
    r_dot = dot_residual(pe)
    r_dist = analysis.shift_residual(torch.cdist(pe, pe)[None])
    return Measured(
        method=f"spread over t of <p_t, p_(t+k)> and of |p_t - p_(t+k)| for each k, positions "
        f"0..{n - 1}, relative to the largest value",
        result=f"dot product: {r_dot:.2e}; distance: {r_dist:.2e} (float64 table)",
        measured={"spread": max(r_dot, r_dist)},
        note="Both depend on k alone. Attention, though, sees them through W_q and W_k: see "
        "seed 004's claim on the dot product.",
    )


@seed_claim("inv-000-09", id="claim-000-any-length", about=("sinusoidal",),
            rules=(Rule("non-finite", ">", 0, FAILS),
                   Rule("float32 error", ">", 1e-3, CAVEAT)))  # fmt: skip
def claim_000_any_length(dim: int, n: int) -> Measured:
    t = torch.arange(10**6, 10**6 + 64)
    div_term = torch.exp(torch.arange(0, dim, 2).float() * (-math.log(10000.0) / dim))
    seed_angles = t.float()[:, None] * div_term  # the seed's float32 product, position * div_term
    seed32 = torch.stack((seed_angles.sin(), seed_angles.cos()), -1).flatten(1).double()
    pe64 = sinusoid(t, dim)
    err_seed = float((seed32 - pe64).abs().max())
    err_posenc = float((PF.sinusoidal_table(t, dim).double() - pe64).abs().max())
    near = sinusoid(torch.arange(4096), dim)
    gap = float(torch.cdist(pe64, near).min())
    nonfinite = int((~torch.isfinite(seed32)).sum())
    return Measured(
        method="evaluate positions 10^6..10^6+63; distance to the vectors of 0..4095; the "
        "seed's float32 table and posenc's float32 table against float64",
        result=f"non-finite values: {nonfinite}; nearest in-range vector at distance {gap:.3f}; "
        "at t ~ 10^6 "
        f"the seed's float32 angles are off by up to {err_seed:.2e}, posenc's float32 table "
        f"(angles reduced in float64) by {err_posenc:.1e}",
        measured={"non-finite": nonfinite, "float32 error": err_seed},
        note="The formula is defined at any t and the far vectors are new. But the seed's "
        "float32 product position * div_term loses precision at large t (posenc takes it in "
        "float64 and drops whole turns before float32 sin / cos), and being defined is not "
        "the same as a model generalizing to longer inputs: see seed 002's extrapolation claim.",
    )


@seed_claim("inv-000-12", id="claim-000-wavelengths", about=("sinusoidal", "rope"),
            rules=(Rule("longest short of 10000·2π by", ">", 0.01, CAVEAT),))  # fmt: skip
def claim_000_wavelengths(dim: int, n: int) -> Measured:
    rows = []
    worst = 0.0
    for d in (4, 16, dim, 512):
        wl = analysis.wavelengths(analysis.pair_angles(sinusoid(torch.arange(64), d)))
        lo, hi = float(wl.min()) / (2 * math.pi), float(wl.max()) / (2 * math.pi)
        worst = max(worst, abs(hi - 10000) / 10000)
        rows.append([str(d), f"2π × {lo:.3f}", f"2π × {hi:,.1f}", f"{hi / 10000:.3f}"])
    return Measured(
        method="wavelength 2π/ω of each sin/cos pair, fitted from the table's angles",
        result=f"shortest 2π exactly; longest short of 10000·2π by up to {100 * worst:.0f}% "
        "(table below)",
        measured={"longest short of 10000·2π by": worst},
        note="The last pair is i = d/2 - 1, so the longest wavelength is 2π·10000^((d-2)/d), "
        "which reaches 10000·2π only as d grows. With the seed's own ω_k = 1/10000^(2k/d) and "
        "k = 1..d/2 the range would instead start at 2π·10000^(2/d): the paper counts from 0.",
        tables=[Table(["d", "shortest", "longest", "longest / (10000·2π)"], rows)],
    )


@seed_claim(
    "inv-000-15",
    id="claim-000-code",
    about=("sinusoidal",),
    rules=(Rule("max difference", ">=", 1e-5, FAILS),),
    otherwise=CAVEAT,  # the same numbers, for a sequence-first x only (see the note)
)
def claim_000_code(dim: int, n: int, *, code: str = CODE) -> Measured:
    module = run_seed(code)["PositionalEncoding"](dim, max_len=n)
    seed_pe = module.pe[:, 0, :].double()  # its buffer is [max_len, 1, d_model]
    diff = float((seed_pe - sinusoid(torch.arange(n), dim)).abs().max())
    return Measured(
        method=f"run the seed's class (d_model = {dim}, max_len = {n}); compare its table with "
        "posenc.functional.sinusoidal_table",
        result=f"max |difference| = {diff:.2e}",
        measured={"max difference": diff},
        note="Same numbers. Its forward slices pe[:x.size(0)], so it expects x as [T, B, D] "
        "(sequence first), the layout of PyTorch's old nn.Transformer; a batch-first x "
        "[B, T, D] gets the encoding of positions 0..B-1 instead.",
        code=code,
    )


@seed_claim("inv-000-01", id="claim-000-rnn-order", about=("nope",),
            rules=(Rule("GRU change", "<", 1e-3, FAILS),
                   Rule("attention change", ">", 1e-5, FAILS)))  # fmt: skip
def claim_000_rnn_order(dim: int, n: int) -> Measured:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 16, dim, generator=g)
    perm = torch.randperm(16, generator=g)
    torch.manual_seed(0)
    rnn = torch.nn.GRU(dim, dim, batch_first=True)
    with torch.no_grad():
        y, ys = rnn(x)[0], rnn(x[:, perm])[0]
    rnn_change = float((ys - y[:, perm]).norm() / y.norm())
    att_change = analysis.permutation_change("nope", dim=dim, heads=4, causal=False)
    return Measured(
        method="shuffle 16 inputs into a random GRU and into one attention layer without an "
        "encoding or mask; |y(shuffled x) - shuffled y(x)| / |y(x)|",
        result=f"GRU: {rnn_change:.2f}; attention: {att_change:.1e}",
        measured={"GRU change": rnn_change, "attention change": att_change},
        note="The GRU's outputs depend on the order; attention's are only permuted with its "
        "inputs. A causal mask alone already breaks that symmetry (seed 002's order claim).",
    )


@seed_claim("inv-000-04", id="claim-000-phase-gap", about=("phase",),
            rules=(Rule("gap ratio T=5 / T=50", "<", 1.5, FAILS),))  # fmt: skip
def claim_000_phase_gap(dim: int, n: int) -> Measured:
    enc = build("phase")  # posenc's phase encoding: t / (T - 1), measured, not the formula
    cols = {T: enc.embed(torch.zeros(1, T, 1), torch.arange(T))[0, :, -1] for T in (5, 50)}
    gaps = {T: float(col[1].double() - col[0].double()) for T, col in cols.items()}
    return Measured(
        method="gap between the phases of positions 0 and 1 (posenc's phase, t / (T - 1)) in "
        "sentences of 5 and 50 words",
        result=f"{gaps[5]:.3f} at T = 5, {gaps[50]:.4f} at T = 50",
        measured={"gap ratio T=5 / T=50": gaps[5] / gaps[50]},
    )


@seed_claim("inv-000-05", id="claim-000-index-unbounded", about=("index",),
            rules=(Rule("growth 64 -> 4096", "<", 2, FAILS),))  # fmt: skip
def claim_000_index_unbounded(dim: int, n: int) -> Measured:
    enc = build("index")
    top = {T: float(enc.embed(torch.zeros(1, T, 1), torch.arange(T))[0, :, -1].max())
           for T in (64, 4096)}  # fmt: skip
    return Measured(
        method="largest value of posenc's index encoding over 64 and 4096 positions (a token "
        "embedding is ~1 per dim)",
        result=f"{top[64]:.0f} at T = 64, {top[4096]:.0f} at T = 4096",
        measured={"growth 64 -> 4096": top[4096] / top[64]},
        note="It drowns the token embeddings it is added to as T grows; the sinusoid stays in "
        "[-1, 1] (claim 003 bounded).",
    )


@seed_claim("inv-000-14", id="claim-000-binary", about=("sinusoidal",),
            rules=(Rule("bit 3 flip period", "<", 8, FAILS),
                   Rule("bit 3 flip period", ">", 8, FAILS),
                   Rule("pair ratio / 2", "<", 0.95, CAVEAT)))  # fmt: skip
def claim_000_binary(dim: int, n: int) -> Measured:
    bits = (torch.arange(64)[:, None] >> torch.arange(4)) & 1  # [64, 4], bit 0 = the lowest
    at = torch.nonzero(bits[1:] != bits[:-1])  # (number - 1, bit) of every flip
    spacing = [float(torch.diff(at[at[:, 1] == k, 0]).double().mean()) for k in range(4)]
    period_bit3 = spacing[3]  # the seed's yellow bit: "every 8 numbers"
    ratio = 10000 ** (2 / dim)  # neighbouring pairs' wavelength ratio
    return Measured(
        method=f"numbers between flips of each bit over 0..63; the sinusoid's wavelength "
        f"ratio between neighbouring pairs, 10000^(2/d), d = {dim}",
        result=f"bits 0..3 flip every {', '.join(f'{x:.0f}' for x in spacing)} numbers; the "
        "pairs' "
        f"wavelengths grow by x{ratio:.3f} per pair, not x2",
        measured={"bit 3 flip period": period_bit3, "pair ratio / 2": ratio / 2},
        note="The order is right (low dims turn fastest, like low bits), but the pairs are "
        "continuous and closer in speed than bits (x1.33 at d = 64, x1.04 at d = 512), and "
        "they never all come back together, where 4 bits repeat after 16 numbers.",
    )
