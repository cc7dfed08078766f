"""Seed 001, continued: its attention formula and shapes, its sinusoid written two ways, and the
learned encoding's initialisation."""

from __future__ import annotations

import torch

from posenc.encodings import build
from posenc.explain.claims.base import FAILS, HOLDS, Measured, Rule, seed_claim
from posenc.explain.claims.tools import formula_error, sinusoid


@seed_claim(
    "inv-001-09",
    id="claim-001-attention-formula",
    about=("nope",),
    rules=(Rule("max |difference|", ">", 1e-12, FAILS),),
    otherwise=HOLDS,
)
def claim_001_attention_formula(dim: int, n: int) -> Measured:
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 2, 4, 16, dim // 4, generator=g, dtype=torch.float64)
    written = torch.softmax(q @ k.transpose(-1, -2) / (dim // 4) ** 0.5, -1) @ v
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    err = float((written - ref).abs().max())
    return Measured(
        method="the formula as written against torch's scaled_dot_product_attention, random "
        f"Q, K, V [2, 4, 16, {dim // 4}], float64",
        result=f"max |difference| = {err:.1e}",
        measured={"max |difference|": err},
    )


@seed_claim(
    "inv-001-10",
    id="claim-001-source-target",
    about=("nope",),
    rules=(
        Rule("query rows - target length", "<", 0, HOLDS),
        Rule("query rows - target length", ">", 0, HOLDS),
    ),
    otherwise=FAILS,
)
def claim_001_source_target(dim: int, n: int) -> Measured:
    attn = torch.nn.MultiheadAttention(dim, 4, batch_first=True)
    target, source = torch.randn(1, 3, dim), torch.randn(1, 5, dim)  # decoder queries, encoder
    _, weights = attn(target, source, source)  # Q from the target, K and V from the source
    rows, cols = weights.shape[-2:]
    return Measured(
        method="cross-attention as in a decoder (torch.nn.MultiheadAttention): queries from a "
        "3-token target, keys and values from a 5-token source",
        result=f"attention weights [{rows}, {cols}]: Q has the target's {rows} rows, K the "
        f"source's {cols}",
        measured={"query rows - target length": rows - 3},
        note="Swapped: n (Q's rows) is the target length and m (K's rows) the source length in "
        "encoder-decoder attention; in self-attention both are the sequence length.",
    )


@seed_claim(
    "inv-001-15",
    id="claim-001-matrix-as-written",
    about=("sinusoidal",),
    rules=(Rule("max |difference|", ">", 1e-6, FAILS),),
    otherwise=HOLDS,
)
def claim_001_matrix_as_written(dim: int, n: int) -> Measured:
    d, L = 8, 6
    p = torch.arange(L, dtype=torch.float64)[:, None]  # row r holds position r
    r = torch.arange(1, L + 1, dtype=torch.float64)[:, None]  # its exponents grow with the row
    ang = torch.cat([p / 10000 ** (2 * j * r / d) for j in (1, 2)], -1)  # as written: 2r/d, 4r/d
    written = torch.stack([ang.sin(), ang.cos()], -1).flatten(1)  # [L, 4]
    err = float((written - sinusoid(torch.arange(L), d)[:, :4]).abs().max())
    return Measured(
        method=f"evaluate the matrix as written (d_model = {d}, L = {L}: the exponent of row t "
        "is 2t/d, 4t/d, ...) against the first four columns of sinusoidal_table",
        result=f"max |difference| = {err:.3f}",
        measured={"max |difference|": err},
        note="The exponent must follow the column pair i (2i/d, starting at 0), not the row; as "
        "written it starts at 2/d and passes 1 for late rows.",
    )


@seed_claim(
    "inv-001-16",
    id="claim-001-learned-init",
    about=("learned",),
    rules=(Rule("std of the initial table", ">", 0.0, FAILS),),
    otherwise=HOLDS,
)
def claim_001_learned_init(dim: int, n: int) -> Measured:
    tables = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        enc = build("learned", dim=dim, max_len=n)
        tables.append(torch.cat([p.detach().flatten() for p in enc.parameters()]))
    spread = float(tables[0].std())
    return Measured(
        method=f"build posenc's learned table (max_len = {n}, d = {dim}) under two seeds",
        result=f"the tables differ (max |difference| "
        f"{float((tables[0] - tables[1]).abs().max()):.3f}); std of the initial values "
        f"{spread:.3f}",
        measured={"std of the initial table": spread},
        note="A false choice: learned parameters start random (here N(0, 0.02)) and training "
        "moves them; 'learned' and 'randomly initialised' go together.",
    )


@seed_claim(
    "inv-001-12",
    id="claim-001-formula",
    about=("sinusoidal",),
    rules=(Rule("max |difference|", ">", 1e-9, FAILS),),
    otherwise=HOLDS,
)
def claim_001_formula(dim: int, n: int) -> Measured:
    err = formula_error(torch.arange(n), dim)
    return Measured(
        method=f"the formula in float64 against sinusoidal_table, positions 0..{n - 1}, d = {dim}",
        result=f"max |difference| = {err:.1e}",
        measured={"max |difference|": err},
    )


@seed_claim(
    "inv-001-19",
    id="claim-001-window-reason",
    about=("learned_window", "learned"),
    rules=(Rule("influence of the tokens", "<", 1e-6, FAILS),),
    otherwise=HOLDS,
)
def claim_001_window_reason(dim: int, n: int) -> Measured:
    torch.manual_seed(0)
    enc = build("learned_window", dim=dim, max_len=n, window=5)
    with torch.no_grad():
        enc.beta.normal_()  # a window term that is far from zero
        pos = torch.arange(n)
        x_a, x_b = torch.randn(2, 1, n, dim)  # two different token sequences
        pe_a, pe_b = enc.embed(x_a, pos) - x_a, enc.embed(x_b, pos) - x_b
        table = enc.table(pos)  # [n, D]: one plain learned table with these rows
        plain = build("learned", dim=dim, max_len=n)
        plain.weight.copy_(table)
        same = float((plain.table(pos) - pe_a[0]).abs().max())
    tokens = float((pe_a - pe_b).abs().max())
    return Measured(
        method=f"seed 001's windowed encoding (learned_window, J = 5, beta ~ N(0, 1), d = {dim}, "
        f"{n} positions) added to two different random token sequences; then a plain learned "
        "table set to its rows",
        result=f"what it adds differs between the two sequences by {tokens:.1e} (max); a plain "
        f"table reproduces it to {same:.1e}",
        measured={"influence of the tokens": tokens},
        note="The window mixes the encodings of earlier positions, not earlier tokens: PE_t is "
        "a function of t alone, so no information about earlier inputs enters, and the whole "
        "sum is one learned table.",
    )


CHECKS = [
    claim_001_attention_formula,
    claim_001_source_target,
    claim_001_matrix_as_written,
    claim_001_learned_init,
    claim_001_formula,
    claim_001_window_reason,
]
