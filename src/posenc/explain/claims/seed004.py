"""Seed 004 (absolute encoding, as a clock): its code, the dot product, frequency range, clock."""

from __future__ import annotations

import math

import torch

from posenc import analysis
from posenc import functional as PF
from posenc.explain.claims.base import seed_claim
from posenc.explain.claims.tools import dot_residual, formula_error, run_seed, sinusoid
from posenc.verdict import CAVEAT, FAILS, HOLDS, Measured, Rule, Table

SEED = "004_04aee0f491a3b5de.txt"
CHECKS: list = []  # its checks in page order (seed_claim appends each)

CODE = """\
def absolute_positional_encoding(seq_len, d_model):
    pe = torch.zeros((seq_len, d_model)) # (seq_len, dmodel)
    pos = torch.arrange(0, seq_len).unsqueeze(-1) # (seq_len, 1)

    div_term = torch.exp(-1 * torch.arrange(0, seq_len, 2) * math.log(10000.0) / d_model)

    pe[:, 0::2] = math.sin(pos * div_term)
    pe[:, 1::2] = math.cos(pos * div_term)

    return pe
"""

FIXES = {  # what is fixed: its replacements (math.log stays: it takes a number)
    "torch.arrange → torch.arange": {"torch.arrange": "torch.arange"},
    "math.sin / math.cos → torch.sin / torch.cos (they take tensors)": {
        "math.sin": "torch.sin",
        "math.cos": "torch.cos",
    },
    "div_term over d_model, not seq_len": {
        "torch.arange(0, seq_len, 2)": "torch.arange(0, d_model, 2)"
    },
}


def fixed_stages(code: str) -> list[tuple[str, str]]:
    """[(what, code)]: the code as written, then with each of FIXES applied in turn."""
    stages = [("as written", code)]
    for what, edits in FIXES.items():
        for old, new in edits.items():
            code = code.replace(old, new)
        stages.append((f"+ {what}", code))
    return stages


@seed_claim("inv-004-14", id="claim-004-code", about=("sinusoidal",),
            rules=(Rule("error as written (inf: does not run)", ">=", 1e-5, FAILS),))  # fmt: skip
def claim_004_code(dim: int, n: int, *, code: str = CODE) -> Measured:
    seq_len, d_model = 16, 8
    ref = sinusoid(torch.arange(seq_len), d_model)
    stages = fixed_stages(code)
    rows, diffs = [], []
    for what, src in stages:
        try:
            pe = run_seed(src)["absolute_positional_encoding"](seq_len, d_model).double()
            diffs.append(float((pe - ref).abs().max()))
            outcome = f"runs; max |difference| from sinusoidal_table = {diffs[-1]:.1e}"
        except Exception as err:  # noqa: BLE001 - showing the seed code's failures
            outcome = analysis.describe_error(err).splitlines()[0]
            diffs.append(None)
        rows.append([what, outcome])
    final = diffs[-1]
    square = run_seed(stages[2][1])["absolute_positional_encoding"](8, 8).double()
    sq_diff = float((square - sinusoid(torch.arange(8), 8)).abs().max())
    as_written = diffs[0]  # None: it does not run
    return Measured(
        method=f"run the seed's code as written, then with each fix (seq_len = {seq_len}, "
        f"d_model = {d_model}); compare with posenc.functional.sinusoidal_table",
        result=f"as written it runs and matches to {as_written:.0e}"
        if as_written is not None
        else f"as written it does not run; with all three fixes it matches to {final:.0e}"
        if final is not None
        else "still fails after the fixes",
        measured={
            "error as written (inf: does not run)": math.inf if as_written is None else as_written
        },
        note="Three bugs: torch.arrange does not exist; math.sin/math.cos take Python numbers, "
        "not tensors; div_term steps over seq_len where it must step over d_model. The last one "
        f"hides when seq_len = d_model (8 × 8 runs and matches: {sq_diff:.0e}). Its comment "
        "'1 / 10000 ** (2 * i / d) = exp(2 * i / d) * log(10000)' is wrong too: it is "
        "exp(-(2i/d) · log 10000).",
        tables=[Table(["version", "outcome"], rows)],
        code=code,
    )


@seed_claim("inv-004-07", id="claim-004-relative-dot", about=("sinusoidal", "rope"),
            rules=(Rule("residual alone", ">=", analysis.SHIFT_TOL, FAILS),
                   Rule("residual through W_q, W_k", ">", analysis.SHIFT_TOL, CAVEAT)))  # fmt: skip
def claim_004_relative_dot(dim: int, n: int) -> Measured:
    pe = sinusoid(torch.arange(n), dim)
    alone = dot_residual(pe)
    g = torch.Generator().manual_seed(0)
    wq, wk = torch.randn(2, dim, dim, generator=g, dtype=torch.float64) / dim**0.5
    through = analysis.shift_residual(((pe @ wq) @ (pe @ wk).T)[None])
    return Measured(
        method="shift residual (spread of score(i, i - k) over i, relative) of <p_i, p_j>, and "
        "of <p_i W_q, p_j W_k> with random W_q, W_k",
        result=f"<p_i, p_j>: {alone:.1e}; through random W_q, W_k: {through:.2f}",
        measured={"residual alone": alone, "residual through W_q, W_k": through},
        note="True for the encodings alone. Attention multiplies by W_q and W_k first, and a "
        "general W_q W_k^T mixes pairs, so the score depends on absolute positions again; "
        "RoPE rotates q and k after the projections, which makes the identity exact.",
    )


@seed_claim("inv-004-09", id="claim-004-frequency-range", about=("sinusoidal",),
            rules=(Rule("decades between the lowest ω and 1/10000", ">", 0.05, CAVEAT),),
            otherwise=HOLDS)  # fmt: skip
def claim_004_frequency_range(dim: int, n: int) -> Measured:
    rows = []
    lows = []
    for d in (4, 16, dim, 512):
        inv = PF.sinusoidal_inv_freq(d, dtype=torch.float64)
        lows.append(float(inv.min()))
        rows.append([str(d), f"{float(inv.max()):.3g}", f"{float(inv.min()):.3g}"])
    far = max(abs(math.log10(x / 1e-4)) for x in lows)
    return Measured(
        method="highest and lowest ω_i = 10000^(-2i/d) for several d",
        result="highest is always 1; lowest is 10000^(-(d-2)/d): table below",
        measured={"decades between the lowest ω and 1/10000": far},
        note="1/10000 is only approached as d grows (i stops at d/2 - 1): for d = 4 the lowest "
        "frequency is 1/100.",
        tables=[Table(["d", "highest ω", "lowest ω"], rows)],
    )


@seed_claim("inv-004-04", id="claim-004-clock", about=("sinusoidal", "rope"),
            rules=(Rule("pairs no slower than the previous", ">", 0, FAILS),))  # fmt: skip
def claim_004_clock(dim: int, n: int) -> Measured:
    wl = analysis.wavelengths(analysis.pair_angles(sinusoid(torch.arange(64), dim)))
    speed = 2 * math.pi / wl
    not_slower = int((torch.diff(speed) >= 0).sum())  # pairs no slower than the one before
    ok = not_slower == 0
    return Measured(
        method=f"angular speed of each pair, d = {dim} (see the clock figure)",
        result=f"pair 0: {float(speed[0]):.3g} rad/position ... pair {len(speed) - 1}: "
        f"{float(speed[-1]):.2g}; strictly decreasing: {ok}",
        measured={"pairs no slower than the previous": not_slower},
    )


@seed_claim(
    "inv-004-08",
    id="claim-004-linear-fall",
    about=("sinusoidal", "rope"),
    rules=(Rule("largest / smallest fall", ">", 1.01, FAILS),),  # linear: equal falls
)
def claim_004_linear_fall(dim: int, n: int) -> Measured:
    w = PF.sinusoidal_inv_freq(dim, dtype=torch.float64)  # ω_i, i = 0..d/2-1
    steps = -torch.diff(w)  # the fall from one pair to the next
    ratios = w[1:] / w[:-1]
    return Measured(
        method=f"ω_i = 10000^(-2i/d), d = {dim}: the fall ω_i - ω_(i+1) and the ratio "
        "ω_(i+1) / ω_i from pair to pair",
        result=f"falls by {float(steps[0]):.3g} first and {float(steps[-1]):.2g} last; ratio "
        f"{float(ratios.min()):.4f}..{float(ratios.max()):.4f} (constant)",
        measured={"largest / smallest fall": float(steps.max() / steps.min())},
        note="The fall is geometric (a constant ratio 10000^(-2/d)): linear in log ω, not in ω.",
    )


@seed_claim("inv-004-11", id="claim-004-pairing", about=("sinusoidal", "scaled_sinusoidal"),
            rules=(Rule("residual, sin only", "<", analysis.SHIFT_TOL, FAILS),
                   Rule("residual, halves", ">=", analysis.SHIFT_TOL, FAILS)),
            otherwise=CAVEAT)  # fmt: skip
def claim_004_pairing(dim: int, n: int) -> Measured:
    pe = sinusoid(torch.arange(n), dim)
    halves = torch.cat([pe[:, 0::2], pe[:, 1::2]], -1)  # [sin..., cos...]: not interleaved
    sines = pe[:, 0::2]  # no cos partners

    layouts = {"interleaved": pe, "halves": halves, "sin only": sines}
    r = {name: dot_residual(p) for name, p in layouts.items()}
    return Measured(
        method="spread over t of <p_t, p_(t+k)> (shift residual) for the interleaved table, the "
        "same columns as [sin..., cos...], and the sines alone",
        result=", ".join(f"{k}: {v:.1e}" for k, v in r.items()),
        measured={"residual, halves": r["halves"], "residual, sin only": r["sin only"]},
        note="sin A sin B + cos A cos B = cos(A - B) needs each frequency's sin and cos: the "
        "pairing. Where the columns sit does not matter (x-transformers' [sin..., cos...] "
        "layout gives the same dot products); interleaving is a convention, not the reason.",
    )


@seed_claim("inv-004-13", id="claim-004-comment", about=("sinusoidal",),
            rules=(Rule("max |left - right|", ">", 1e-9, FAILS),))  # fmt: skip
def claim_004_comment(dim: int, n: int) -> Measured:
    d = 8
    i = torch.arange(d // 2, dtype=torch.float64)
    wanted = 1 / 10000 ** (2 * i / d)
    written = torch.exp(2 * i / d) * math.log(10000)  # the comment, as written
    right = torch.exp(-(2 * i / d) * math.log(10000))
    err = float((written - wanted).abs().max())
    return Measured(
        method="both sides at d = 8, i = 0..3, float64",
        result=f"left {', '.join(f'{x:.3g}' for x in wanted)}; right as written "
        f"{', '.join(f'{x:.3g}' for x in written)} (off by up to {err:.3g})",
        measured={"max |left - right|": err},
        note="The identity is 1 / 10000^(2i/d) = exp(-(2i/d) * log(10000)) "
        f"(matches to {float((right - wanted).abs().max()):.0e}); the code itself computes "
        "that, only its comment is wrong.",
    )


@seed_claim("inv-004-02", id="claim-004-formula", about=("sinusoidal",),
            rules=(Rule("max |difference|", ">", 1e-9, FAILS),))  # fmt: skip
def claim_004_formula(dim: int, n: int) -> Measured:
    err = formula_error(torch.arange(n), dim)
    return Measured(
        method=f"the formula in float64 against posenc.functional.sinusoidal_table, positions "
        f"0..{n - 1}, d = {dim}",
        result=f"max |difference| = {err:.1e}",
        measured={"max |difference|": err},
    )


@seed_claim("inv-004-01", id="claim-004-rope-reuses", about=("rope", "sinusoidal"),
            rules=(Rule("max relative difference", ">", 1e-6, FAILS),))  # fmt: skip
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


@seed_claim("inv-004-03", id="claim-004-complex-direction", about=("sinusoidal", "rope"),
            rules=(Rule("turn per position (rad)", "<", 0, CAVEAT),))  # fmt: skip
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


@seed_claim("inv-004-12", id="claim-004-frequency-count", about=("sinusoidal",),
            rules=(Rule("distinct frequencies - 256", "<", 0, FAILS),
                   Rule("distinct frequencies - 256", ">", 0, FAILS)))  # fmt: skip
def claim_004_frequency_count(dim: int, n: int) -> Measured:
    count = int(PF.sinusoidal_inv_freq(512, dtype=torch.float64).unique().numel())
    return Measured(
        method="distinct values of sinusoidal_inv_freq(512)",
        result=f"{count}",
        measured={"distinct frequencies - 256": count - 256},
    )


@seed_claim("inv-004-05", id="claim-004-clock-time", about=("sinusoidal", "rope"),
            rules=(Rule("closest two codes", "<=", 1e-6, FAILS),
                   Rule("speed ratio", "<", 60, CAVEAT)))  # fmt: skip
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


@seed_claim("inv-004-10", id="claim-004-same-properties", about=("sinusoidal",),
            rules=(Rule("lowest ω, d=16 / d=512", ">", 1.5, CAVEAT),))  # fmt: skip
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
