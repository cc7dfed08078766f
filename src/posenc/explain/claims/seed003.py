"""Seed 003 (a generated textbook chapter): its d = 4 worked example, boundedness, nearness."""

from __future__ import annotations

import torch

from posenc.explain.claims.base import CAVEAT, FAILS, HOLDS, Measured, Rule, Table, seed_claim
from posenc.explain.claims.tools import f4, sinusoid

SEED = "003_4f20139358f45fd7.txt"

EXAMPLE = [  # p_1..p_5 as printed, d = 4
    [0.8415, 0.5403, 0.9950, 0.0998],
    [0.9093, -0.4161, 0.9801, 0.1987],
    [0.1411, -0.9900, 0.9553, 0.2958],
    [-0.7568, -0.6536, 0.9209, 0.3899],
    [-0.9589, 0.2837, 0.8775, 0.4794],
]


@seed_claim(
    "inv-003-17",
    id="claim-003-worked-example",
    about=("sinusoidal",),
    rules=(Rule("max error against the correct values", ">", 5e-4, FAILS),),
    otherwise=HOLDS,
)
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


@seed_claim(
    "inv-003-12",
    id="claim-003-bounded",
    about=("sinusoidal",),
    rules=(Rule("max |value|", ">", 1 + 1e-12, FAILS),),
    otherwise=HOLDS,
)
def claim_003_bounded(dim: int, n: int) -> Measured:
    pe = sinusoid(torch.arange(4096), dim)
    top = float(pe.abs().max())
    return Measured(
        method=f"max |value| over positions 0..4095, d = {dim}",
        result=f"{top:.6f}",
        measured={"max |value|": top},
        note="Unlike the 'cumulative' encoding t (posenc's index), which grows without bound.",
    )


@seed_claim(
    "inv-003-11",
    id="claim-003-near-similar",
    about=("sinusoidal",),
    rules=(Rule("steps where the distance shrinks", ">", 0, CAVEAT),),
    otherwise=HOLDS,
)
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


CHECKS = [claim_003_worked_example, claim_003_bounded, claim_003_near_similar]
