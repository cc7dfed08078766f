"""Seed 003 (a generated textbook chapter): its d = 4 worked example, boundedness, nearness."""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from posenc import analysis
from posenc import functional as PF
from posenc.encodings import build
from posenc.explain.claims.base import seed_claim
from posenc.explain.claims.tools import (
    dot_residual,
    f4,
    formula_error,
    seed_error,
    sinusoid,
    written_formula,
)
from posenc.verdict import CAVEAT, FAILS, HOLDS, Measured, Rule, Table

SEED = "003_4f20139358f45fd7.txt"
CHECKS: list = []  # its checks in page order (seed_claim appends each)

EXAMPLE = [  # p_1..p_5 as printed, d = 4
    [0.8415, 0.5403, 0.9950, 0.0998],
    [0.9093, -0.4161, 0.9801, 0.1987],
    [0.1411, -0.9900, 0.9553, 0.2958],
    [-0.7568, -0.6536, 0.9209, 0.3899],
    [-0.9589, 0.2837, 0.8775, 0.4794],
]


@seed_claim("inv-003-17", id="claim-003-worked-example", about=("sinusoidal",),
            rules=(Rule("max error against the correct values", ">", 5e-4, FAILS),))  # fmt: skip
def claim_003_worked_example(dim: int, n: int, *, example: list[list[float]] = EXAMPLE) -> Measured:
    seed = torch.tensor(example, dtype=torch.float64)
    t = torch.arange(1, 6, dtype=torch.float64)
    correct = sinusoid(t, 4)  # 10000^(2/4) = 100 in the second pair
    as_written = torch.stack(  # the seed's own formula, with 10^(2/4)
        [t.sin(), t.cos(), (t / 10**0.5).sin(), (t / 10**0.5).cos()], dim=-1
    )
    guess = torch.stack([t.sin(), t.cos(), (t / 10).cos(), (t / 10).sin()], dim=-1)
    err_correct = float((seed - correct).abs().max())
    err_written = float((seed[:, 2:] - as_written[:, 2:]).abs().max())
    err_guess = float((seed - guess).abs().max())
    rows = [
        [f"p_{int(p)}"]
        + [f"{f4(seed[i, c])}" for c in (2, 3)]
        + [f"{f4(as_written[i, c])}" for c in (2, 3)]
        + [f"{f4(correct[i, c])}" for c in (2, 3)]
        for i, p in enumerate(t)
    ]
    return Measured(
        method="recompute dims 2, 3 with the seed's own formula (10^(2/4)) and with the correct "
        "10000^(2/4) = 100 (posenc.functional.sinusoidal_table)",
        result=f"dims 0, 1 are right; dims 2, 3 are wrong: off by up to {err_correct:.3f} from "
        f"the correct values and by {err_written:.3f} from the seed's own formula",
        measured={"max error against the correct values": err_correct},
        note="The formula should use 10000^(2i/d) = 100 for the second pair, not 10^(2/4); and "
        "the printed third/fourth values do not follow even 10^(2/4): they match "
        f"[cos(t/10), sin(t/10)] (to {err_guess:.0e}), cos and sin swapped with divisor 10.",
        tables=[
            Table(
                [
                    "t",
                    "seed dim 2",
                    "seed dim 3",
                    "10^(2/4): sin",
                    "10^(2/4): cos",
                    "correct sin(t/100)",
                    "correct cos(t/100)",
                ],
                rows,
                "dims 2 and 3: the seed's values, its formula as written, and the correct ones",
            )
        ],
    )


@seed_claim("inv-003-12", id="claim-003-bounded", about=("sinusoidal",),
            rules=(Rule("max |value|", ">", 1 + 1e-12, FAILS),))  # fmt: skip
def claim_003_bounded(dim: int, n: int) -> Measured:
    pe = sinusoid(torch.arange(4096), dim)
    top = float(pe.abs().max())
    return Measured(
        method=f"max |value| over positions 0..4095, d = {dim}",
        result=f"{top:.6f}",
        measured={"max |value|": top},
        note="Unlike the 'cumulative' encoding t (posenc's index), which grows without bound.",
    )


@seed_claim("inv-003-11", id="claim-003-near-similar", about=("sinusoidal",),
            rules=(Rule("steps where the distance shrinks", ">", 0, CAVEAT),))  # fmt: skip
def claim_003_near_similar(dim: int, n: int) -> Measured:
    pe = sinusoid(torch.arange(2 * n), dim)
    d = torch.stack([(pe[k:] - pe[: 2 * n - k]).norm(dim=-1).mean() for k in range(n)])
    drops = torch.nonzero(torch.diff(d) < 0).flatten()
    first = int(drops[0]) + 1 if drops.numel() else None
    return Measured(
        method=f"|p_t - p_(t+k)| against k = 0..{n - 1} (d = {dim})",
        result=f"grows from 0 at k = 0, but first shrinks again at k = {first}; "
        f"{drops.numel()} of {n - 1} steps go down"
        if first
        else "grows monotonically",
        measured={"steps where the distance shrinks": int(drops.numel())},
        note="Near positions are close, but distance is not monotonic in k: the fast pairs "
        "come round again, so some far positions are closer than nearer ones.",
    )


Q_ONEHOT = "one-hot floats per position / sinusoid's, T = 65536"


@seed_claim("inv-003-03", id="claim-003-pos-size", about=("sinusoidal", "onehot", "index"),
            rules=(Rule("fusions that run with d_pos != d_x", "<", 1, FAILS),
                   Rule("fusions that run with d_pos != d_x", "<", 2, CAVEAT)))  # fmt: skip
def claim_003_pos_size(dim: int, n: int) -> Measured:
    x, p = torch.zeros(8, dim), PF.sinusoidal_table(torch.arange(8), dim // 2)  # d_pos = d_x / 2
    added, joined = seed_error(lambda: x + p), seed_error(lambda: torch.cat([x, p], -1))
    runs = sum(e == "no error" for e in (added, joined))
    return Measured(
        method=f"fuse x [8, {dim}] with p [8, {dim // 2}] by the seed's two usual fusions, "
        "element-wise addition and concatenation",
        result=f"addition: {added}; concatenation: {joined}",
        measured={"fusions that run with d_pos != d_x": runs},
        note="Only concatenation allows d_pos != d_x (posenc's onehot and index: widths D + T "
        "and D + 1). Addition, the Transformer's (and BERT's, GPT's), needs d_pos = d_model, "
        "so in the models the seed goes on to describe the sizes are equal, not different.",
    )


@seed_claim("inv-003-04", id="claim-003-onehot-cost", about=("onehot", "sinusoidal", "learned"),
            rules=(Rule(Q_ONEHOT, "<=", 1, FAILS),
                   Rule("max |onehot(t) W - W[t]|", "<", 1e-6, CAVEAT)))  # fmt: skip
def claim_003_onehot_cost(dim: int, n: int) -> Measured:
    rows, width = [], 0
    for T in (512, 4096, 65536):
        enc = build("onehot", dim=dim, max_len=T)  # [x, onehot(t)]: width dim + T
        width = enc.embed(torch.zeros(1, 2, dim), torch.arange(2)).shape[-1] - dim
        rows.append(
            [str(T), str(width), f"{T * width * 4 / 2**20:,.0f}", f"{T * dim * 4 / 2**20:g}"]
        )
    w = torch.randn(512, dim, generator=torch.Generator().manual_seed(0))
    t = torch.arange(512)
    lookup = float((F.one_hot(t, 512).float() @ w - w[t]).abs().max())  # onehot(t) W = W[t]
    return Measured(
        method=f"width of posenc's onehot position part for T = 512..65536 against the "
        f"sinusoid's d = {dim}, float32 tables; onehot(t) W against W[t] (T = 512)",
        result=f"at T = 65536 the one-hot part is {width // dim}x the sinusoid's width (a "
        f"{rows[-1][2]} MiB table); onehot(t) W = W[t] to {lookup:.0e}",
        measured={Q_ONEHOT: width / dim, "max |onehot(t) W - W[t]|": lookup},
        note="True of the dense form. But the first layer turns onehot(t) into onehot(t) W = "
        "W[t], a row of a learned table, which nn.Embedding looks up directly (T x D "
        "parameters, no T-wide vectors); the real limits are the parameters per position "
        "and no position past T.",
        tables=[Table(["T", "one-hot width", "table MiB", "sinusoid table MiB"], rows)],
    )


@seed_claim("inv-003-05", id="claim-003-index-relative", about=("index", "alibi"),
            rules=(Rule("shift residual of t s", "<", analysis.SHIFT_TOL, FAILS),
                   Rule("shift residual of s - t", "<", analysis.SHIFT_TOL, CAVEAT)))  # fmt: skip
def claim_003_index_relative(dim: int, n: int) -> Measured:
    pos, T = torch.arange(64), 64
    t = pos.double()
    alone = analysis.shift_residual(
        analysis.scores(build("index", dim=dim), pos, pos, dim=dim, heads=1)
    )
    f = torch.stack([torch.ones(T, dtype=torch.float64), t], -1)  # [1, t]: a constant feature too
    linear = analysis.shift_residual(
        (f @ torch.tensor([[0.0, 1.0], [-1.0, 0.0]]).double() @ f.T)[None]
    )
    sin = sinusoid(pos, dim)
    return Measured(
        method=f"shift residual (T = {T}) of posenc's index encoding's <v_t, v_s> = t s, and of "
        "the bilinear score [1, t] W [1, s]^T with W = [[0, 1], [-1, 0]] (= s - t)",
        result=f"t s: {alone:.2f}; [1, t] W [1, s]^T: {linear:.0e}; the sinusoid's <p_t, p_s>: "
        f"{dot_residual(sin):.0e}",
        measured={"shift residual of t s": alone, "shift residual of s - t": linear},
        note="The product t s is absolute. But a query-key map over [1, t] (any constant "
        "feature) can form c (s - t), a linear distance bias like causal ALiBi's; no other "
        "function of the distance, and the raw t grows without bound "
        "(claim-000-index-unbounded).",
    )


@seed_claim("inv-003-08", id="claim-003-formula", about=("sinusoidal",),
            rules=(Rule("max |difference|", ">", 1e-6, FAILS),
                   Rule("elements undefined at odd d_pos", ">", 0, CAVEAT)))  # fmt: skip
def claim_003_formula(dim: int, n: int) -> Measured:
    t = torch.arange(1, n + 1)
    err = formula_error(t, dim)
    odd = dim + 1
    undefined = odd - written_formula(t, odd).shape[1]
    return Measured(
        method=f"the formula in float64 against posenc.functional.sinusoidal_table (t = 1..{n}, "
        f"d_pos = {dim}); the elements it defines at the odd d_pos = {odd}",
        result=f"max |difference| = {err:.0e}; at d_pos = {odd} it defines "
        f"{odd - undefined} of {odd} elements",
        measured={"max |difference|": err, "elements undefined at odd d_pos": undefined},
        note="Right for even d_pos (i indexes pairs, not elements as the text says). For odd "
        "d_pos the last element is left undefined; posenc keeps one more sine there, other "
        "code requires an even size. The seed's own example uses 10^(2i/d) instead "
        "(claim-003-worked-example).",
    )


@seed_claim("inv-003-09", id="claim-003-small-periodic", about=("sinusoidal",),
            rules=(Rule("neighbour difference / |p|", ">", 0.5, FAILS),
                   Rule("closest return for k >= 64, in neighbour steps", ">", 1, CAVEAT)),
            otherwise=HOLDS)  # fmt: skip
def claim_003_small_periodic(dim: int, n: int) -> Measured:
    pe = sinusoid(torch.arange(8192), dim)
    diff = (pe - pe[0]).norm(dim=-1)  # |p_(t+k) - p_t| depends on k alone
    size, back = float(pe[0].norm()), float(diff[64:].min() / diff[1])
    return Measured(
        method=f"|p_(t+k) - p_t| against k = 0..8191 (d = {dim}), relative to |p| = {size:.2f} "
        "and to the neighbour step k = 1",
        result=f"neighbours: {float(diff[1]) / size:.2f} |p|; largest: "
        f"{float(diff.max()) / size:.2f} |p|; for k >= 64 never below {back:.2f} neighbour steps",
        measured={
            "neighbour difference / |p|": float(diff[1]) / size,
            "closest return for k >= 64, in neighbour steps": back,
        },
        note="Small between neighbours only: distant positions differ by more than |p|. The "
        "difference ripples as the fast pairs turn but never comes back: the frequencies are "
        "incommensurate, so it is quasi-periodic, never periodic (a period would give two "
        "positions one vector; claim-000-unique).",
    )


@seed_claim("inv-003-14", id="claim-003-cheap", about=("sinusoidal", "learned"),
            rules=(Rule("build / one D x D projection", ">", 12, FAILS),
                   Rule("build / lookup", ">", 1000, FAILS)))  # fmt: skip
def claim_003_cheap(dim: int, n: int) -> Measured:
    T, D = 4096, 512
    pos, table, x, w = torch.arange(T), torch.randn(T, D), torch.randn(T, D), torch.randn(D, D)
    times = []
    for fn in (lambda: PF.sinusoidal_table(pos, D), lambda: F.embedding(pos, table), lambda: x @ w):
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - start)
        times.append(min(runs))
    build_t, lookup_t, proj_t = times
    m = {"build / lookup": build_t / lookup_t, "build / one D x D projection": build_t / proj_t}
    return Measured(
        method=f"CPU, one run, best of 3: sinusoidal_table(T = {T}, D = {D}) against a lookup "
        "of a stored [T, D] table and one projection x W (T x D times D x D)",
        result=f"build {build_t * 1e3:.1f} ms = {m['build / lookup']:.0f}x the lookup, "
        f"{m['build / one D x D projection']:.2f}x one projection",
        measured=m,
        timings=tuple(m),
        note="Slower than looking up a stored table, but less than one layer's matmuls (12 "
        "D x D projections per position: 4 in attention, 8 in the MLP), and the table can be "
        "built once and kept. Thresholds are generous: timings on a shared machine vary.",
    )


@seed_claim("inv-003-18", id="claim-003-example-distances", about=("sinusoidal",),
            rules=(Rule("closest two vectors", "<", 5e-4, FAILS),
                   Rule("distance inversions", ">", 0, CAVEAT)))  # fmt: skip
def claim_003_example_distances(dim: int, n: int, *, example=EXAMPLE) -> Measured:
    def inversions(p: torch.Tensor) -> int:  # j nearer than k in position but farther in space
        d, idx = torch.cdist(p, p), range(len(p))
        return sum(
            int(d[i, j] > d[i, k])
            for i in idx
            for j in idx
            for k in idx
            if j != i != k and abs(i - j) < abs(i - k)
        )

    seed, right = torch.tensor(example, dtype=torch.float64), sinusoid(torch.arange(1, 6), 4)
    closest = analysis.min_pairwise_distance(seed)[0]
    d, c = torch.cdist(seed, seed), torch.cdist(right, right)
    return Measured(
        method="pairwise distances of the printed p_1..p_5 and of the correct ones; pairs where "
        "a position nearer in t is farther in space",
        result=f"all distinct (closest {closest:.3f}); |p_1 - p_2| = {float(d[0, 1]):.2f}, "
        f"|p_1 - p_4| = {float(d[0, 3]):.2f} > |p_1 - p_5| = {float(d[0, 4]):.2f} (correct "
        f"values: {float(c[0, 3]):.2f} > {float(c[0, 4]):.2f})",
        measured={"closest two vectors": closest, "distance inversions": inversions(seed)},
        note="Distinct, and neighbours are the closest pairs; but p_5 is nearer p_1 than p_4 "
        "is: the fast pair (period 2π ≈ 6.3 positions) comes round again, so distance is "
        "not monotonic (claim-003-near-similar). The seed breaks off mid-sentence here.",
    )
