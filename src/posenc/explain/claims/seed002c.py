"""Seed 002, continued (seed002b.py): relative positions from the sinusoid's offset map and dot
product, relative encodings' scores, the shapes the relative-bias snippets print."""

from __future__ import annotations

import contextlib
import io

import torch

from posenc import analysis
from posenc import functional as PF
from posenc.encodings import build
from posenc.explain.claims import seed002
from posenc.explain.claims.base import CAVEAT, FAILS, HOLDS, Measured, Rule, Table, seed_claim
from posenc.explain.claims.tools import dot_residual, run_seed, sinusoid

SEED = seed002.SEED
DRIVER = """max_len = 512
{arg} = {size}
rel_pos_bias{s} = {cls}(max_len, {arg})
q_len = 50
k_len = 50
bias{s} = rel_pos_bias{s}(q_len, k_len)
print("{label}相对位置偏置的 shape:", bias{s}.shape)
"""  # the seed's code after each class, comments dropped (filled in below)
SHOWN = (  # the output the seed shows for each snippet
    "相对位置偏置的 shape: torch.Size([50, 50])",
    "T5 相对位置偏置的 shape: torch.Size([50, 50, 8])",
    "DeBERTa 相对位置偏置的 shape: torch.Size([50, 50, 256])",
)
SIZES = (("d_model", 256, ""), ("num_heads", 8, "_t5"), ("d_model", 256, "_deberta"))
RUNS = [  # (class, driver, shown)
    (
        code,
        DRIVER.format(cls=code.split()[1][:-12], arg=a, size=n, s=s, label=out.split("相对")[0]),
        out,
    )
    for code, (a, n, s), out in zip((seed002.TXL, seed002.T5, seed002.DEBERTA), SIZES, SHOWN)
]
RELATIVE = ("t5", "alibi", "rope", "transformer_xl", "deberta", "shaw")


@seed_claim(
    "inv-002-18",
    id="claim-002-relative-map",
    about=("sinusoidal",),
    rules=(
        Rule("rotation error", ">", 1e-6, FAILS),
        Rule("least-squares residual", ">", 1e-6, FAILS),
    ),
    otherwise=HOLDS,
)
def claim_002_relative_map(dim: int, n: int) -> Measured:
    pe, rot, fit = sinusoid(torch.arange(max(256, 2 * dim)), dim), 0.0, 0.0
    w = PF.sinusoidal_inv_freq(dim, dtype=torch.float64)
    for k in (1, 8, 64):  # p_(t+k) = p_t R_k, R_k rotating each pair by k w_i
        s, c, cos, sin = pe[:-k, 0::2], pe[:-k, 1::2], (k * w).cos(), (k * w).sin()
        pred = torch.stack([s * cos + c * sin, c * cos - s * sin], -1).flatten(1)
        rot = max(rot, float((pred - pe[k:]).abs().max()))
        fit = max(fit, analysis.linear_residual(pe, k))
    return Measured(
        method=f"d = {dim}, t < {len(pe)}, k = 1, 8, 64: p_(t+k) against p_t rotated by k w_i "
        "per pair (one map for all t); the least-squares M_k of the table, relative residual",
        result=f"rotation: max error {rot:.0e}; least-squares M_k: residual {fit:.0e}",
        measured={"rotation error": rot, "least-squares residual": fit},
        note="Exact for the encoding: an offset k is one linear map, the same at every "
        "position (a rotation of each pair), the property Vaswani et al. chose the sinusoid "
        "for. A model must still learn to use it: through W_q, W_k the score is no longer a "
        "function of the offset alone (claim-004-relative-dot); what trained models do is "
        "the arena's.",
    )


def probe_residual(table: torch.Tensor) -> float:
    """Relative residual of the least-squares fit i - j ~ [p_i, p_j, 1] over all pairs i, j."""
    T = table.shape[0]
    i, j = (x.flatten() for x in torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij"))
    x = torch.cat([table[i], table[j], torch.ones(T * T, 1, dtype=table.dtype)], -1)
    y = (i - j).to(table.dtype)[:, None]
    fit = x @ torch.linalg.lstsq(x, y, driver="gelsd").solution
    return float((fit - y).norm() / (y - y.mean()).norm())


@seed_claim(
    "inv-002-20",
    id="claim-002-absolute-relative",
    about=("sinusoidal", "learned"),
    rules=(
        Rule("shift residual, learned", "<", analysis.SHIFT_TOL, FAILS),
        Rule("shift residual, sinusoidal", "<", analysis.SHIFT_TOL, CAVEAT),
    ),
    otherwise=HOLDS,
)
def claim_002_absolute_relative(dim: int, n: int) -> Measured:
    T, P, D = 64, 256, 32
    pos, sin = torch.arange(T), sinusoid(torch.arange(T), dim)
    torch.manual_seed(0)
    learned = build("learned", dim=dim, max_len=P)  # at its initialisation
    m = {
        "shift residual, sinusoidal": dot_residual(sin),
        "shift residual, learned": analysis.shift_residual(
            analysis.scores(learned, pos, pos, dim=dim, heads=1)
        ),
        "probe residual, sinusoidal": probe_residual(sinusoid(torch.arange(P), D)),
        "probe residual, learned": probe_residual(learned.weight[:, :D].detach().double()),
    }
    return Measured(
        method=f"shift residual of <p_i, p_j> (i, j < {T}, d = {dim}); linear probe of i - j from "
        f"[p_i, p_j] (i, j < {P}, d = {D}, relative residual); sinusoid, learned table at init",
        result=", ".join(f"{k}: {v:.1e}" for k, v in m.items()),
        measured=m,
        note="True of a learned table, not of the sinusoid this section defines: its "
        "<p_i, p_j> depends on i - j alone, and i - j is a linear function of [p_i, p_j]. "
        "Attention's W_q, W_k hide it again unless they learn to keep it "
        "(claim-004-relative-dot); relative encodings build it into the score.",
    )


@seed_claim(
    "inv-002-22",
    id="claim-002-relative-distance",
    about=RELATIVE,
    rules=(Rule("largest shift residual", ">=", analysis.SHIFT_TOL, FAILS),),
    otherwise=HOLDS,
)
def claim_002_relative_distance(dim: int, n: int) -> Measured:
    pos, res = torch.arange(64), {}
    for name in RELATIVE:
        torch.manual_seed(0)
        enc = build(name, dim=dim, heads=4, head_dim=dim, train_len=64)
        res[name] = analysis.shift_residual(analysis.scores(enc, pos, pos, dim=dim, heads=4))
    return Measured(
        method="shift residual (spread of score(i, i - k) over i) with one fixed q, k at every "
        f"position, T = 64, d = {dim}, 4 heads",
        result=", ".join(f"{k} {v:.0e}" for k, v in res.items()),
        measured={"largest shift residual": max(res.values())},
        note="Their positional scores depend on i - j alone (RoPE's to float32 rounding); the "
        "content part of attention still depends on the words. The seed's own Transformer-XL "
        "code is not relative (claim-002-transformer-xl), and T5 gives all distances past "
        "128 one bucket.",
    )


@seed_claim(
    "inv-002-26",
    id="claim-002-printed-shapes",
    about=("transformer_xl", "t5", "deberta"),
    rules=(Rule("printed lines that differ", ">", 0, FAILS),),
    otherwise=HOLDS,
)
def claim_002_printed_shapes(dim: int, n: int, *, runs=RUNS) -> Measured:
    rows = []
    for cls, driver, shown in runs:
        with contextlib.redirect_stdout(out := io.StringIO()):
            run_seed(cls + driver)
        rows.append([shown, out.getvalue().strip()])
    wrong = sum(a != b for a, b in rows)
    return Measured(
        method="run each snippet as printed (max_len 512, d_model 256 or 8 heads, q_len = k_len "
        "= 50); compare what it prints with the output the seed shows",
        result=f"{len(rows) - wrong} of {len(rows)} printed lines match",
        measured={"printed lines that differ": wrong},
        note="The shapes are right; what they hold is not: Transformer-XL's table is absolute "
        "(claim-002-transformer-xl), T5's [q, k, heads] must be permuted to [heads, q, k] "
        "before it is added to the scores, and DeBERTa's [q, k, 256] are embeddings, not a "
        "bias (claim-002-t5-deberta).",
        tables=[Table(["seed's output", "printed here"], rows)],
        code="\n".join(cls + driver for cls, driver, _ in runs),
    )


CHECKS = [
    claim_002_relative_map,
    claim_002_absolute_relative,
    claim_002_relative_distance,
    claim_002_printed_shapes,
]
