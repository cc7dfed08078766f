"""Seed 002 (a long tutorial): worked table, order, frequencies, extrapolation, relative code."""

from __future__ import annotations

import math

import torch

from posenc import analysis
from posenc import functional as PF
from posenc.encodings import build
from posenc.explain.claims.base import CAVEAT, FAILS, HOLDS, Measured, Rule, Table, seed_claim
from posenc.explain.claims.tools import f4, run_seed, seed_error, sinusoid

SEED = "002_194117be01fb43d6.txt"

TABLE = [  # pos, dim 0 (sin), dim 1 (cos), dim 2 (sin), dim 3 (cos), as printed
    [0, 0.0000, 1.0000, 0.0000, 1.0000],
    [1, 0.8415, 0.5403, 0.0100, 1.0000],
    [2, 0.9093, -0.4161, 0.0200, 1.0000],
]

TXL = """\
class TransformerXLRelativePositionBias(nn.Module):
    def __init__(self, max_len, d_model):
        super(TransformerXLRelativePositionBias, self).__init__()
        self.position_bias = nn.Parameter(torch.randn(max_len, max_len))
        self.d_model = d_model

    def forward(self, q_len, k_len):
        bias = self.position_bias[:q_len, :k_len]
        return bias
"""

T5 = """\
class T5RelativePositionBias(nn.Module):
    def __init__(self, max_len, num_heads):
        super(T5RelativePositionBias, self).__init__()
        self.relative_position_bias = nn.Embedding(2 * max_len - 1, num_heads)
        self.max_len = max_len

    def forward(self, q_len, k_len):
        positions = torch.arange(q_len).unsqueeze(1) - torch.arange(k_len).unsqueeze(0)
        positions = positions + (self.max_len - 1)
        bias = self.relative_position_bias(positions)
        return bias
"""

DEBERTA = """\
class DeBERTaRelativePositionBias(nn.Module):
    def __init__(self, max_len, d_model):
        super(DeBERTaRelativePositionBias, self).__init__()
        self.relative_position_embedding = nn.Embedding(2 * max_len - 1, d_model)
        self.max_len = max_len

    def forward(self, q_len, k_len):
        positions = torch.arange(q_len).unsqueeze(1) - torch.arange(k_len).unsqueeze(0)
        positions = positions + (self.max_len - 1)
        bias = self.relative_position_embedding(positions)
        return bias
"""

ORDER = (
    "Without positional encoding attention cannot perceive order: shuffle the words and the "
    "weighted sums stay the same."
)


@seed_claim(
    "inv-002-08",
    id="claim-002-table",
    about=("sinusoidal",),
    rules=(Rule("max |seed - computed|", ">", 5e-4, FAILS),),
    otherwise=HOLDS,
)
def claim_002_table(dim: int, n: int, *, table: list[list[float]] = TABLE) -> Measured:
    seed = torch.tensor([r[1:] for r in table], dtype=torch.float64)
    ours = sinusoid(torch.arange(3), 4)
    diff = (seed - ours).abs()
    worst = float(diff.max())
    rows = []
    for p in range(3):
        rows.append([str(p)] + [f"{f4(seed[p, c])} / {f4(ours[p, c])}" for c in range(4)])
    i, j = divmod(int(diff.argmax()), 4)
    return Measured(
        method="posenc.functional.sinusoidal_table(positions 0..2, d = 4), rounded to 4 places",
        result=f"max |seed - computed| = {worst:.1e} (largest at position {i}, dim {j})",
        measured={"max |seed - computed|": worst},
        note="Correct to the 4th decimal, which the seed itself calls approximate: cos(0.02) = "
        f"{f4(ours[2, 3])} is printed as 1.0000.",
        tables=[
            Table(
                ["pos", "dim 0 (sin)", "dim 1 (cos)", "dim 2 (sin)", "dim 3 (cos)"],
                rows,
                "seed's value / computed value",
            )
        ],
    )


@seed_claim(
    "inv-002-03",
    id="claim-002-order",
    about=("nope", "sinusoidal"),
    rules=(
        Rule("change, no mask", ">=", 1e-5, FAILS),
        Rule("change, causal mask", ">", 1e-3, CAVEAT),
    ),
    otherwise=HOLDS,
)
def claim_002_order(dim: int, n: int) -> Measured:
    bi = analysis.permutation_change("nope", dim=dim, heads=4, causal=False)
    causal = analysis.permutation_change("nope", dim=dim, heads=4, causal=True)
    sin = analysis.permutation_change("sinusoidal", dim=dim, heads=4, causal=False)
    return Measured(
        method="shuffle the tokens into one attention layer (fixed random weights, T = 16); "
        "|y(shuffled x) - shuffled y(x)| / |y(x)|",
        result=f"no encoding, no mask: {bi:.1e}; no encoding, causal mask: {causal:.3f}; "
        f"sinusoidal, no mask: {sin:.3f}",
        measured={"change, no mask": bi, "change, causal mask": causal},
        note="Without positions and without a mask the outputs are only shuffled along with the "
        "inputs (order is invisible). A causal mask alone already breaks that symmetry, so "
        "decoder-only models without an encoding (NoPE) can still learn order (Haviv et al. "
        "2022).",
    )


@seed_claim(
    "inv-002-09",
    id="claim-002-frequency-order",
    about=("sinusoidal",),
    rules=(Rule("pairs faster than the previous", "<", 1, FAILS),),
    otherwise=HOLDS,
)
def claim_002_frequency_order(dim: int, n: int) -> Measured:
    wl = analysis.wavelengths(analysis.pair_angles(sinusoid(torch.arange(64), dim)))
    omega = 2 * math.pi / wl
    rising = int((torch.diff(omega) > 0).sum())  # pairs faster than the one before
    falling = rising == 0
    return Measured(
        method=f"angular speed ω_i (radians per position) of each pair, d = {dim}",
        result=f"ω_0 = {float(omega[0]):.3g} (dims 0, 1) ... ω_{len(omega) - 1} = "
        f"{float(omega[-1]):.2g} (dims {dim - 2}, {dim - 1}); falls monotonically: {falling}",
        measured={"pairs faster than the previous": rising},
        note="It is the other way round: dims 0, 1 turn fastest (wavelength 2π) and the last "
        "pair slowest, as seed 004's clock has it (see the waveform and wavelength figures).",
    )


@seed_claim(
    "inv-002-25",
    id="claim-002-transformer-xl",
    about=("transformer_xl",),
    rules=(Rule("shift residual of the seed's bias", ">", analysis.SHIFT_TOL, FAILS),),
    otherwise=HOLDS,
)
def claim_002_transformer_xl(dim: int, n: int, *, code: str = TXL) -> Measured:
    L = 32
    torch.manual_seed(0)
    seed = run_seed(code)["TransformerXLRelativePositionBias"](L, dim)
    with torch.no_grad():
        b = seed(L, L)[None].double()  # [1, L, L]
    seed_r = analysis.shift_residual(b)
    d = float((b[0, 1:, 1:] - b[0, :-1, :-1]).abs().max())
    torch.manual_seed(0)
    enc = build("transformer_xl", dim=dim, heads=1, head_dim=dim, max_len=L)
    pos = torch.arange(L)
    ours = analysis.shift_residual(analysis.scores(enc, pos, pos, dim=dim, heads=1))
    return Measured(
        method="shift residual of bias(i, j): largest spread over i of bias(i, i - k), "
        "relative; and |bias(i+1, j+1) - bias(i, j)|",
        result=f"seed's code: residual {seed_r:.2f}, bias(i+1, j+1) differs from bias(i, j) by "
        f"up to {d:.2f}; posenc's transformer_xl (fixed q, k at every position): {ours:.1e}",
        measured={"shift residual of the seed's bias": seed_r},
        note="The seed's table is indexed by absolute (i, j): an absolute bias, not a relative "
        "one. Transformer-XL scores (q_i + u)·k_j + (q_i + v)·W_r R_(i-j) with a sinusoidal "
        "R of the distance i - j and rel_shift (Dai et al. 2019), so shifting both positions "
        "changes nothing.",
        code=code,
    )


@seed_claim(
    "inv-002-27",
    id="claim-002-t5-deberta",
    about=("t5", "deberta"),
    rules=(  # indexed by i - j is right; real T5 / DeBERTa buckets run at any length
        Rule("shift residual", ">=", analysis.SHIFT_TOL, FAILS),
        Rule("snippets failing past max_len", ">", 0, CAVEAT),
    ),
    otherwise=HOLDS,
)
def claim_002_t5_deberta(dim: int, n: int, *, t5: str = T5, deberta: str = DEBERTA) -> Measured:
    L = 512
    ns = run_seed(t5 + deberta)
    t5_bias = ns["T5RelativePositionBias"](L, 8)
    deb = ns["DeBERTaRelativePositionBias"](L, 16)
    with torch.no_grad():
        b = t5_bias(64, 64).permute(2, 0, 1).double()  # seed returns [q, k, heads]
    residual = analysis.shift_residual(b)
    t5_err = seed_error(lambda: t5_bias(L + 1, L + 1))
    deb_err = seed_error(lambda: deb(L + 1, L + 1))
    rel = torch.arange(-(4 * L - 1), 4 * L)  # key - query
    t5_buckets = int(PF.t5_bucket(rel).unique().numel())
    deb_buckets = int(PF.deberta_bucket(-rel, 256, 512).clamp(-255, 255).unique().numel())
    rows = [
        ["seed's T5", f"{2 * L - 1} (one per distance)", t5_err],
        [
            "T5 (Raffel et al.), 32 buckets, max_distance 128",
            f"{t5_buckets}",
            "no error: distances past 128 share the last bucket",
        ],
        ["seed's DeBERTa", f"{2 * L - 1} rows of d_model", deb_err],
        [
            "DeBERTa-v2, position_buckets 256, max_relative_positions 512",
            f"{deb_buckets}",
            "no error: log buckets, clipped",
        ],
    ]
    errors = sum(e != "no error" for e in (t5_err, deb_err))  # T5's, DeBERTa's buckets: none
    return Measured(
        method=f"run the seed's classes (max_len = {L}); count distinct learned entries for "
        f"distances |i - j| < {4 * L} with T5's and DeBERTa's real bucketing; call them with "
        f"q_len = k_len = {L + 1}",
        result=f"the seed's T5 bias is relative (shift residual {residual:.0e}) "
        "but unbucketed; both snippets fail past max_len (table below)",
        measured={"shift residual": residual, "snippets failing past max_len": errors},
        note="Relative indexing is right, the rest is not T5's or DeBERTa's method: T5 shares "
        "log-spaced buckets (exact up to 8 per direction, then log-spaced to 128, one bucket "
        "beyond), so any length works; the seed's table has a separate parameter per distance "
        "and raises an IndexError past max_len. The seed's DeBERTa returns [q, k, d_model] "
        "embeddings, neither a bias nor DeBERTa's disentangled c2p + p2c scores with log "
        "buckets.",
        tables=[Table(["implementation", "learned entries per head", f"q_len = {L + 1}"], rows)],
        code=t5 + "\n" + deberta,
    )


CHECKS = [
    claim_002_table,
    claim_002_order,
    claim_002_frequency_order,
    claim_002_transformer_xl,
    claim_002_t5_deberta,
]
