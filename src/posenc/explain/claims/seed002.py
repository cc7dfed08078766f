"""Seed 002 (a long tutorial): worked table, order, frequencies, extrapolation, relative code."""

from __future__ import annotations

import contextlib
import io
import math

import torch

from posenc import analysis
from posenc import functional as PF
from posenc.encodings import build
from posenc.explain.claims.base import seed_claim
from posenc.explain.claims.tools import dot_residual, f4, run_seed, seed_error, sinusoid
from posenc.verdict import CAVEAT, FAILS, HOLDS, Measured, Rule, Table

SEED = "002_194117be01fb43d6.txt"
CHECKS: list = []  # its checks in page order (seed_claim appends each)

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


@seed_claim("inv-002-08", id="claim-002-table", about=("sinusoidal",),
            rules=(Rule("max |seed - computed|", ">", 5e-4, FAILS),))  # fmt: skip
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


@seed_claim("inv-002-03", id="claim-002-order", about=("nope", "sinusoidal"),
            rules=(Rule("change, no mask", ">=", 1e-5, FAILS),
                   Rule("change, causal mask", ">", 1e-3, CAVEAT)))  # fmt: skip
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


@seed_claim("inv-002-09", id="claim-002-frequency-order", about=("sinusoidal",),
            rules=(Rule("pairs faster than the previous", "<", 1, FAILS),))  # fmt: skip
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


@seed_claim("inv-002-25", id="claim-002-transformer-xl", about=("transformer_xl",),
            rules=(Rule("shift residual of the seed's bias", ">", analysis.SHIFT_TOL, FAILS),),
            otherwise=HOLDS)  # fmt: skip
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


Q_SEEN = "median distance to the nearest seen position, in steps"
Q_SUMS = "closest distinct sums, in neighbour steps"

INPUT = "input_embedding = word_embedding[pos] + positional_embedding[pos]"


def steps(pe: torch.Tensor) -> torch.Tensor:
    return (pe[1:] - pe[:-1]).norm(dim=-1)  # |p_(t+1) - p_t|


@seed_claim("inv-002-01", id="claim-002-rnn-vanishing", about=("nope",),
            rules=(Rule("|W^100|", ">=", 1e-2, FAILS),
                   Rule("|dh_100/dh_0|", ">=", 1e-2, FAILS),
                   Rule("|W^100|, small entries", ">", 1, CAVEAT)))  # fmt: skip
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


@seed_claim("inv-002-11", id="claim-002-periodic-new", about=("sinusoidal",),
            rules=(Rule(Q_SEEN, ">", 2, FAILS),
                   Rule(Q_SEEN, ">", 1, CAVEAT)))  # fmt: skip
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


@seed_claim("inv-002-12", id="claim-002-later-faster", about=("sinusoidal",),
            rules=(Rule("late step / early step", "<", 1 + 1e-6, FAILS),))  # fmt: skip
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


@seed_claim("inv-002-14", id="claim-002-no-jump", about=("sinusoidal",),
            rules=(Rule("largest relative step deviation", ">", 1e-6, FAILS),))  # fmt: skip
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


@seed_claim("inv-002-16", id="claim-002-add-same-size", about=("sinusoidal",),
            rules=(Rule(Q_SUMS, "<", 1e-6, FAILS),
                   Rule("position read-out errors", ">", 0.01, CAVEAT)))  # fmt: skip
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


@seed_claim("inv-002-17", id="claim-002-input-line", about=("sinusoidal",),
            rules=(Rule("difference, sentence", "<", 1e-6, FAILS),
                   Rule("difference, table", "<", 1e-6, CAVEAT)))  # fmt: skip
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
    for code, (a, n, s), out in zip((TXL, T5, DEBERTA), SIZES, SHOWN)
]
RELATIVE = ("t5", "alibi", "rope", "transformer_xl", "deberta", "shaw")


@seed_claim("inv-002-18", id="claim-002-relative-map", about=("sinusoidal",),
            rules=(Rule("rotation error", ">", 1e-6, FAILS),
                   Rule("least-squares residual", ">", 1e-6, FAILS)))  # fmt: skip
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


@seed_claim("inv-002-20", id="claim-002-absolute-relative", about=("sinusoidal", "learned"),
            rules=(Rule("shift residual, learned", "<", analysis.SHIFT_TOL, FAILS),
                   Rule("shift residual, sinusoidal", "<", analysis.SHIFT_TOL, CAVEAT)),
            otherwise=HOLDS)  # fmt: skip
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


@seed_claim("inv-002-22", id="claim-002-relative-distance", about=RELATIVE,
            rules=(Rule("largest shift residual", ">=", analysis.SHIFT_TOL, FAILS),))  # fmt: skip
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


@seed_claim("inv-002-26", id="claim-002-printed-shapes", about=("transformer_xl", "t5", "deberta"),
            rules=(Rule("printed lines that differ", ">", 0, FAILS),))  # fmt: skip
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
