"""Seed 002, continued (seed002.py is full): the RNN's vanishing product, periodicity and
steps of the sinusoid past the training length, adding the embeddings, the input line."""

from __future__ import annotations

import math

import torch

from posenc import analysis
from posenc import functional as PF
from posenc.explain.claims import seed002
from posenc.explain.claims.base import CAVEAT, FAILS, HOLDS, Measured, Rule, Table, seed_claim
from posenc.explain.claims.tools import run_seed, sinusoid

Q_SEEN = "median distance to the nearest seen position, in steps"
Q_SUMS = "closest distinct sums, in neighbour steps"

SEED = seed002.SEED
INPUT = "input_embedding = word_embedding[pos] + positional_embedding[pos]"


def steps(pe: torch.Tensor) -> torch.Tensor:
    return (pe[1:] - pe[:-1]).norm(dim=-1)  # |p_(t+1) - p_t|


@seed_claim(
    "inv-002-01",
    id="claim-002-rnn-vanishing",
    about=("nope",),
    rules=(
        Rule("|W^100|", ">=", 1e-2, FAILS),
        Rule("|dh_100/dh_0|", ">=", 1e-2, FAILS),
        Rule("|W^100|, small entries", ">", 1, CAVEAT),
    ),
    otherwise=HOLDS,
)
def claim_002_rnn_vanishing(dim: int, n: int) -> Measured:
    H, g, f64 = 64, torch.Generator().manual_seed(0), torch.float64  # H hidden units
    w = torch.randn(H, H, generator=g, dtype=f64)
    w = w * 0.9 / torch.linalg.eigvals(w).abs().max()  # spectral radius 0.9
    h, jac = torch.zeros(H, dtype=f64), torch.eye(H, dtype=f64)
    for x in torch.randn(100, H, generator=g, dtype=f64):  # h_t = tanh(W h_(t-1) + x_t)
        h = torch.tanh(w @ h + x)
        jac = (1 - h**2)[:, None] * (w @ jac)  # dh_t/dh_0
    small = torch.rand(H, H, generator=g, dtype=f64) * 0.1  # every entry in [0, 0.1)
    m = {
        "|W|": w,
        "|W^100|": w.matrix_power(100),
        "|dh_100/dh_0|": jac,
        "|W^100|, small entries": small.matrix_power(100),
    }
    m = {k: float(torch.linalg.matrix_norm(v, 2)) for k, v in m.items()}  # spectral norms
    return Measured(
        method=f"W ({H} x {H}, random) of spectral radius 0.9: spectral norms of W^100 and of "
        "dh_100/dh_0, h_t = tanh(W h_(t-1) + x_t); W^100 for W with entries in [0, 0.1)",
        result=", ".join(f"{k} = {v:.1e}" for k, v in m.items()) + f" (0.9^100 = {0.9**100:.1e})",
        measured=m,
        note="Right for a scalar. For a matrix 'W < 1' has to mean the spectral radius (the "
        "largest |eigenvalue|): then W^k and the gradient vanish geometrically (tanh' <= 1 "
        "only speeds it up), though the norm |W| > 1 can make W^k grow first. Small entries "
        "are not enough: the [0, 0.1) matrix has a radius > 1 and its powers explode; radius "
        "> 1 is the exploding gradient (Bengio et al. 1994; Pascanu et al. 2013).",
    )


@seed_claim(
    "inv-002-11",
    id="claim-002-periodic-new",
    about=("sinusoidal",),
    rules=(Rule(Q_SEEN, ">", 2, FAILS), Rule(Q_SEEN, ">", 1, CAVEAT)),
    otherwise=HOLDS,
)
def claim_002_periodic_new(dim: int, n: int) -> Measured:
    pe = sinusoid(torch.arange(4096), dim)
    near = torch.cdist(pe[512:], pe[:512]).min(dim=1).values / float(steps(pe[:2]))
    med, wl = float(near.median()), 2 * math.pi / PF.sinusoidal_inv_freq(dim, dtype=torch.float64)
    return Measured(
        method=f"d = {dim}: distance from each position 512..4095 to the nearest of 0..511, in "
        "neighbour steps |p_1 - p_0|; pairs with a wavelength <= 512",
        result=f"median {med:.2f} steps, closest {float(near.min()):.2f} (position "
        f"{512 + int(near.argmin())}); {int((wl <= 512).sum())} of {len(wl)} pairs turn fully "
        "within 0..511",
        measured={Q_SEEN: med},
        note="The fast pairs repeat, but the slow ones reach angles never seen, so the vector "
        "never repeats (claim-000-unique): past the training range every position is new, "
        "several neighbour steps from any trained one. What carries over is the relation "
        "between positions, p_(t+k) = M_k p_t (claim-002-relative-map); whether a model uses "
        "it is claim-002-sinusoidal-extrapolates.",
    )


@seed_claim(
    "inv-002-12",
    id="claim-002-later-faster",
    about=("sinusoidal",),
    rules=(Rule("late step / early step", "<", 1 + 1e-6, FAILS),),
    otherwise=HOLDS,
)
def claim_002_later_faster(dim: int, n: int) -> Measured:
    s = steps(sinusoid(torch.arange(4096), dim))
    ratio, spread = float(s[3584:].mean() / s[:512].mean()), float((s.max() - s.min()) / s.mean())
    return Measured(
        method=f"step |p_(t+1) - p_t|, d = {dim}: mean over t = 3584..4094 / mean over 0..511; "
        "spread (max - min) / mean over 0..4094",
        result=f"{float(s[0]):.4f} at every t: late / early = {ratio:.12f}, spread {spread:.0e}",
        measured={"late step / early step": ratio},
        note="Frequency belongs to the dimension pair, not to the position: w_i = "
        "10000^(-2i/d), fastest in dims 0, 1 (claim-002-frequency-order). Every position moves "
        "by the same step, sqrt(2 sum_i (1 - cos w_i)).",
    )


@seed_claim(
    "inv-002-14",
    id="claim-002-no-jump",
    about=("sinusoidal",),
    rules=(Rule("largest relative step deviation", ">", 1e-6, FAILS),),
    otherwise=HOLDS,
)
def claim_002_no_jump(dim: int, n: int) -> Measured:
    s = steps(sinusoid(torch.arange(601), dim))
    dev = float((s - s[0]).abs().max() / s[0])
    return Measured(
        method=f"step |p_(t+1) - p_t|, t = 0..599, d = {dim}: largest deviation from the first",
        result=f"511 -> 512: {float(s[511]):.6f}, 512 -> 513: {float(s[512]):.6f}, 0 -> 1: "
        f"{float(s[0]):.6f}; largest relative deviation {dev:.0e}",
        measured={"largest relative step deviation": dev},
        note="The encoding itself goes on smoothly past any length. Whether a model trained at "
        "512 uses positions 513..600 well is claim-002-sinusoidal-extrapolates; a learned "
        "table has no row 512 at all (claim-002-learned-cannot).",
    )


@seed_claim(
    "inv-002-16",
    id="claim-002-add-same-size",
    about=("sinusoidal",),
    rules=(Rule(Q_SUMS, "<", 1e-6, FAILS), Rule("position read-out errors", ">", 0.01, CAVEAT)),
    otherwise=HOLDS,
)
def claim_002_add_same_size(dim: int, n: int) -> Measured:
    V, T, g, rows = 32, 64, torch.Generator().manual_seed(0), []
    for d in sorted({32, 128, 512, dim}):
        e, p = torch.randn(V, d, generator=g).double(), sinusoid(torch.arange(T), d)
        s = (e[:, None] + p[None]).reshape(V * T, d)  # e: nn.Embedding's N(0, 1)
        err = float(((s @ p.T).argmax(-1) != torch.arange(T).repeat(V)).double().mean())
        rows.append([str(d), f"{err:.1%}"])
        if d == dim:
            wrong, apart = err, analysis.min_pairwise_distance(s)[0] / float(steps(p[:2]))
    return Measured(
        method=f"{V} random token embeddings + sinusoid of positions 0..{T - 1}: closest distinct "
        "sums; the position read back from a sum as the best-matching p_t (argmax <sum, p_t>)",
        result=f"d = {dim}: distinct sums >= {apart:.2f} neighbour steps apart (lossless); the "
        f"position read back is wrong in {wrong:.1%}",
        measured={Q_SUMS: apart, "position read-out errors": wrong},
        note="Equal size is what adding needs, not a reason it suffices. Nothing is lost (no "
        "two (token, position) pairs give the same sum), but token and position share the "
        "dims: the token blurs a read-out of the position (less as d grows), and attention's "
        "<x_i + p_i, x_j + p_j> mixes word-position cross terms (TUPE, Ke et al. 2021, unties "
        "them). Concatenation keeps them apart at the cost of width.",
        tables=[Table(["d", "position read-out errors"], rows)],
    )


@seed_claim(
    "inv-002-17",
    id="claim-002-input-line",
    about=("sinusoidal",),
    rules=(
        Rule("difference, sentence", "<", 1e-6, FAILS),
        Rule("difference, table", "<", 1e-6, CAVEAT),
    ),
    otherwise=HOLDS,
)
def claim_002_input_line(dim: int, n: int, *, code: str = INPUT) -> Measured:
    table = torch.randn(4096, dim, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([[11, 503, 2047], [2047, 503, 11]])  # 我 爱 编程 / 编程 爱 我
    pe = {"positional_embedding": sinusoid(torch.arange(512), dim).float(), "pos": torch.arange(3)}
    runs = [(table, ids[0]), (table, ids[1]), (table[ids[0]], range(3)), (table[ids[1]], range(3))]
    x = [run_seed(code, word_embedding=w, token_ids=t, **pe)["input_embedding"] for w, t in runs]
    table_d, sentence_d = (float((x[i] - x[i + 1]).norm() / x[i].norm()) for i in (0, 2))
    return Measured(
        method=f"run the line for '我 爱 编程' and '编程 爱 我' (pos = 0, 1, 2; d = {dim}) with "
        "word_embedding the vocabulary table [4096, d], then the embedded sentence [3, d]",
        result=f"|input(A) - input(B)| / |input(A)|: table {table_d:.1e}"
        + (" (the same input)" if table_d < 1e-6 else "")
        + f", embedded sentence {sentence_d:.2f}",
        measured={"difference, table": table_d, "difference, sentence": sentence_d},
        note="Beside positional_embedding[pos], word_embedding[pos] reads as the vocabulary "
        "table looked up by position: every sentence of a length gets the same input. It "
        "must be word_embedding[token_ids] (or the already embedded sentence).",
        code=code,
    )


CHECKS = [
    claim_002_rnn_vanishing,
    claim_002_periodic_new,
    claim_002_later_faster,
    claim_002_no_jump,
    claim_002_add_same_size,
    claim_002_input_line,
]
