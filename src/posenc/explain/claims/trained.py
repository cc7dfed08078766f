"""Seed claims that need trained models, read from arena results (`--arena DB[,DB...]`).

docs/arena/claims/run.sh trains the cells these read (labels below), beside the main run
(docs/arena/arena.sqlite) and the passkey run (docs/arena/passkey/arena.sqlite). Each check
states the labels, task and lengths it compares and the rule on the numbers; without a database,
or without those cells in it, the evidence is absent (posenc.verdict.Absent: "not measured
here") and the note names the command. Values are medians over the seeds a database holds.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable

import torch

from posenc import functional as PF
from posenc.analysis.measures import table_jump, table_periodicity
from posenc.arena.tasks import build_task
from posenc.explain.claims.arena import arena_results
from posenc.explain.claims.base import seed_claim
from posenc.verdict import CAVEAT, FAILS, HOLDS, Absent, Measured, Rule, Table

RUN = "docs/arena/claims/run.sh"
ARENA = "docs/arena/arena.sqlite,docs/arena/passkey/arena.sqlite,docs/arena/claims/arena.sqlite"
# the labels run.sh trains (the main run has nope, sinusoidal, rope, alibi, t5, learned)
LEARNED_COPY = "learned(max_len=64)"  # a table longer than copy's 2 x 2L tokens
WINDOW = "learned_window(max_len=64)"  # seed 001's windowed learned encoding
SCALED = "sinusoidal(learned_scale=true)"
CONCAT = "sinusoidal(fusion=concat)"
LEARNED_PASSKEY = "learned(max_len=256)"
LEARNED_CURVE = "learned(max_len=512)"  # lm at L = 64: learning curves
LEARNED_LONG = "learned(max_len=1024)"  # lm at L = 512, judged at 600 (seed 002's lengths)
CHECKS: list = []  # in page order (seed_claim appends each)
L = {"copy": 8, "reverse": 8, "sort": 8, "passkey": 32, "lm": 32}  # the main run's lengths


class Missing(LookupError):
    """The database lacks a number a check needs."""


class Evidence:
    """Medians over seeds from the arena databases; `used` collects what a check read."""

    def __init__(self, arena):
        self.arena, self.rows, self.used = arena, {}, []

    def get(self, label: str, task: str, metric: str, eval_len: int, train_len=None) -> float:
        train_len = L[task] if train_len is None else train_len
        if label not in self.rows:
            self.rows[label] = arena_results(self.arena, label)
        for r in self.rows[label]:
            key = (r["task"], r["metric"], r["eval_len"], r["train_len"])
            if key == (task, metric, eval_len, train_len) and r["value"] is not None:
                row = [label, task, str(train_len), str(eval_len), metric, f"{r['value']:.4g}"]
                self.used.append([*row, str(r["seeds"])])
                return r["value"]
        raise Missing(f"{label} on {task} (L = {train_len}): {metric} at {eval_len}")

    def at_l(self, label: str, task: str, metric: str = "accuracy") -> float:
        """The metric at the training length L of the main run."""
        return self.get(label, task, metric, L[task])

    def mean(self, label: str, task: str, metric: str, lens, train_len=None) -> float:
        return statistics.fmean(self.get(label, task, metric, n, train_len) for n in lens)


Measure = Callable[[Evidence], tuple[dict[str, float], str]]


def from_arena(arena, measure: Measure, *, method: str, note: str = "") -> Measured:
    """measure(Evidence) -> (numbers, result text), with the table of the arena numbers read.
    No database, or a number it lacks, is evidence absent by design (posenc.verdict.Absent)."""
    if arena is None:
        raise Absent(
            "no arena database given (posenc explain --claims --arena DB[,DB...])",
            note=f"Needs trained models: `bash {RUN}`, then --arena {ARENA}.",
            method=method,
        )
    ev = Evidence(arena)
    try:
        measured, result = measure(ev)
    except Missing as gap:
        raise Absent(
            f"not in the database: {gap}", note=f"`bash {RUN}` trains the cells this reads.",
            method=method,
        ) from None  # fmt: skip
    header = ["label", "task", "train", "eval", "metric", "median", "seeds"]
    rows = list(dict.fromkeys(tuple(r) for r in ev.used))
    table = Table(header, [list(r) for r in rows], "the arena numbers this check read")
    return Measured(measured=measured, result=result, method=method, note=note, tables=[table])


def arena_claim(item_id: str, *, method: str, note: str = "", **finding):
    """seed_claim for a measure(Evidence) -> (numbers, result text): the check, called as
    (dim, n, arena=None), measures it through from_arena."""

    def wrap(measure: Measure):
        @functools.wraps(measure)
        def check(dim: int, n: int, arena=None) -> Measured:
            return from_arena(arena, measure, method=method, note=note)

        return seed_claim(item_id, **finding)(check)

    return wrap


COPY_IN = range(1, 9)  # copy's sizes up to L = 8
PASSKEY_LENS = (32, 64, 128, 256)


@arena_claim("inv-000-06", id="claim-000-index-generalizes", about=("index", "sinusoidal"),
             rules=(Rule("sinusoidal - index, exact match at L", ">", 0.1, HOLDS),
                    Rule("sinusoidal - index, exact match at L", ">", 0.02, CAVEAT)),
             otherwise=FAILS, method="arena, copy trained at L = 8: the raw index (concatenated, "
             "projected) against the sinusoid, exact match on held-out instances at L and at "
             "L + 1")  # fmt: skip
def claim_000_index_generalizes(ev: Evidence):
    idx, sin = (ev.at_l(e, "copy") for e in ("index", "sinusoidal"))
    near = ev.get("index", "copy", "accuracy", 9), ev.get("sinusoidal", "copy", "accuracy", 9)
    gap = sin - idx
    return {"sinusoidal - index, exact match at L": gap}, (
        f"copy, exact match at L = 8 (held-out instances): index {idx:.3f}, sinusoidal "
        f"{sin:.3f}; one symbol past L: index {near[0]:.3f}, sinusoidal {near[1]:.3f}"
    )


@arena_claim("inv-001-02", id="claim-001-rnn", about=("sinusoidal", "nope"),
             rules=(Rule("gain in token accuracy", ">=", 0.02, HOLDS),),
             otherwise=FAILS, method="arena, an LSTM language model (lstm backbone, the "
             "Transformer's width and depth) with the sinusoid added to its inputs and without, "
             "copy at L = 8; helps if the token accuracy gains 0.02 or more")  # fmt: skip
def claim_001_rnn(ev: Evidence):
    with_pe = ev.mean("lstm:sinusoidal", "copy", "token_accuracy", COPY_IN)
    without = ev.mean("lstm:nope", "copy", "token_accuracy", COPY_IN)
    return {"gain in token accuracy": with_pe - without}, (
        f"LSTM on copy, token accuracy over sizes 1..8: with the sinusoid {with_pe:.3f}, "
        f"without {without:.3f}"
    )


@arena_claim("inv-001-07", id="claim-001-long-range", about=("sinusoidal", "learned"),
             rules=(Rule("sinusoidal - learned, passkey accuracy", ">", 0.02, HOLDS),
                    Rule("sinusoidal - learned, passkey accuracy", "<", -0.02, FAILS)),
             otherwise=CAVEAT, method="arena, passkey (the key at any distance up to the length) "
             "trained at 32, evaluated at 32..256: the sinusoid against a learned table large "
             "enough for every length")  # fmt: skip
def claim_001_long_range(ev: Evidence):
    sin = ev.mean("sinusoidal", "passkey", "accuracy", PASSKEY_LENS)
    learned = ev.mean(LEARNED_PASSKEY, "passkey", "accuracy", PASSKEY_LENS)
    return {"sinusoidal - learned, passkey accuracy": sin - learned}, (
        f"passkey trained at L = 32, accuracy averaged over 32..256 tokens: sinusoidal "
        f"{sin:.3f}, learned (256-row table, 256 x D parameters) {learned:.3f}; the "
        "sinusoid has no parameters"
    )


@arena_claim("inv-001-13", id="claim-001-trainable-scale", about=("sinusoidal",),
             rules=(Rule("|s - 1|", "<", 0.05, FAILS),
                    Rule("accuracy lost against s = 1", ">", 0.05, CAVEAT)),
             method="arena, copy at L = 8: sinusoidal(learned_scale=true) (PE times a learned "
             "scalar s, init 1) against the fixed sinusoid; training adjusts it if s moves 5% or "
             "more")  # fmt: skip
def claim_001_trainable_scale(ev: Evidence):
    s = ev.at_l(SCALED, "copy", "encoding_scale")
    acc, fixed = ev.at_l(SCALED, "copy"), ev.at_l("sinusoidal", "copy")
    return {"|s - 1|": abs(s - 1), "accuracy lost against s = 1": fixed - acc}, (
        f"copy at L = 8: the learned scale ends at s = {s:.3f} (init 1); exact match "
        f"{acc:.3f} with it, {fixed:.3f} without"
    )


@arena_claim("inv-001-17", id="claim-001-window", about=("learned_window", "learned"),
             rules=(Rule("window - plain table, exact match at L", "<", -0.05, FAILS),),
             method="arena, copy at L = 8: the seed's formula implemented (learned_window: "
             "psi = f = one table, beta_j scalars, w_j vectors, J = 5) against the plain table of "
             "the same size; the formula works as an encoding if it trains within 0.05 of the "
             "table",
             note="The seed leaves psi, pos', f, beta and w undefined; no published encoding of "
             "this form is named. The window sum depends on t alone, so it is itself one learned "
             "table (claim-001-window-reason).")  # fmt: skip
def claim_001_window(ev: Evidence):
    win, plain = ev.at_l(WINDOW, "copy"), ev.at_l(LEARNED_COPY, "copy")
    return {"window - plain table, exact match at L": win - plain}, (
        f"copy at L = 8, exact match: windowed (J = 5) {win:.3f}, plain learned table {plain:.3f}"
    )


ALGORITHMIC = ("copy", "reverse", "sort")
RELATIVE = ("t5", "alibi", "rope")
SHARE = "share of relative encodings below sinusoidal"
BEYOND = "loss@512-600"  # seed 002's lengths: trained at 512, run at 600
WITHIN = "loss@0-512"


def past_512(ev: Evidence, label: str):
    """Loss on positions 512..599 minus loss on 0..511, lm trained at 512."""
    rise = ev.get(label, "lm", BEYOND, 600, 512) - ev.get(label, "lm", WITHIN, 600, 512)
    return {"loss rise past 512 (nats)": rise}, (
        f"lm trained at 512 tokens, run at 600: the loss on positions 512..599 is {rise:+.3f} "
        f"nats against positions 0..511 ({label})"
    )


@arena_claim("inv-002-15", id="claim-002-sinusoidal-extrapolates", about=("sinusoidal",),
             rules=(Rule("loss rise past 512 (nats)", "<", 0.1, HOLDS),),
             otherwise=FAILS, method="arena, lm trained at 512 tokens and run at 600 (the seed's "
             "example): the loss per token on the new positions 512..599 against the trained ones; "
             "handles them if it rises by less than 0.1 nats")  # fmt: skip
def claim_002_sinusoidal_extrapolates(ev: Evidence):
    return past_512(ev, "sinusoidal")


@arena_claim("inv-002-06", id="claim-002-nope-drops", about=("nope", "sinusoidal"),
             rules=(Rule("sinusoidal - nope, exact match at L", ">", 0.05, HOLDS),),
             otherwise=FAILS, method="arena (causal decoders), copy / reverse / sort at L = 8: "
             "NoPE against the sinusoid, mean exact-match gap; drops if the gap exceeds 0.05",
             note="A causal mask gives order by itself (Kazemnejad et al. 2023); without one, "
             "attention without positions is permutation-equivariant "
             "(claim-000-rnn-order).")  # fmt: skip
def claim_002_nope_drops(ev: Evidence):
    gaps = {t: ev.at_l("sinusoidal", t) - ev.at_l("nope", t)
            for t in ALGORITHMIC}  # fmt: skip
    mean = sum(gaps.values()) / len(gaps)
    return {"sinusoidal - nope, exact match at L": mean}, "exact match at L = 8, " + ", ".join(
        f"{t}: sinusoidal - nope = {g:+.3f}" for t, g in gaps.items()
    )


@arena_claim("inv-002-21", id="claim-002-relative-long", about=(*RELATIVE, "sinusoidal"),
             rules=(Rule(SHARE, "<=", 0, FAILS), Rule(SHARE, "<", 1, CAVEAT)),
             method="arena, lm trained at 32 tokens, perplexity at 256: T5, ALiBi and RoPE "
             "against the absolute sinusoid (the learned table has no rows there)")  # fmt: skip
def claim_002_relative_long(ev: Evidence):
    sin = ev.get("sinusoidal", "lm", "ppl", 256)
    rel = {e: ev.get(e, "lm", "ppl", 256) for e in RELATIVE}
    share = sum(p < sin for p in rel.values()) / len(rel)
    text = ", ".join(f"{e} {p:.3g}" for e, p in rel.items())
    return {SHARE: share}, (
        f"lm trained at 32, perplexity at 256 (8L): {text}; sinusoidal {sin:.3g}"
    )


@arena_claim("inv-002-33", id="claim-002-learned-flexible", about=("learned", "sinusoidal"),
             rules=(Rule("learned / sinusoidal perplexity at L", "<", 0.98, HOLDS),
                    Rule("learned / sinusoidal perplexity at L", ">", 1.02, FAILS)),
             otherwise=CAVEAT, method="arena, within the training length: lm perplexity at L = 32 "
             "(and copy's exact match); more expressive if the learned table's perplexity is 2% "
             "lower or better")  # fmt: skip
def claim_002_learned_flexible(ev: Evidence):
    ratio = ev.at_l("learned", "lm", "ppl") / ev.at_l("sinusoidal", "lm", "ppl")
    copy = ev.at_l(LEARNED_COPY, "copy"), ev.at_l("sinusoidal", "copy")
    return {"learned / sinusoidal perplexity at L": ratio}, (
        f"lm at L = 32: learned / sinusoidal perplexity = {ratio:.3f}; copy at L = 8, exact "
        f"match: learned {copy[0]:.3f}, sinusoidal {copy[1]:.3f}"
    )


@arena_claim("inv-002-34", id="claim-002-learned-cannot", about=("learned",),
             rules=(Rule("loss rise past 512 (nats)", ">=", 0.1, HOLDS),),
             otherwise=FAILS, method=f"arena, lm trained at 512 tokens with {LEARNED_LONG}: a "
             "table longer than the training length, so positions 512..599 have rows (untrained "
             "ones); the loss per token there against positions 0..511; cannot generalize if it "
             "rises by 0.1 nats or more")  # fmt: skip
def claim_002_learned_cannot(ev: Evidence):
    return past_512(ev, LEARNED_LONG)


@arena_claim("inv-002-35", id="claim-002-learned-distribution", about=("learned",),
             rules=(Rule("drift of unseen rows / seen rows", "<", 0.1, HOLDS),),
             otherwise=FAILS, method="arena, copy at L = 8 with a 64-row table: how far each row "
             "moved from its init, rows the training sequences reached against rows they never "
             "reached",
             note="The table learns only the positions its data covers: a row no sequence reaches "
             "gets no gradient and keeps its random init.")  # fmt: skip
def claim_002_learned_distribution(ev: Evidence):
    seen = ev.at_l(LEARNED_COPY, "copy", "table_drift@seen")
    unseen = ev.at_l(LEARNED_COPY, "copy", "table_drift@unseen")
    return {"drift of unseen rows / seen rows": unseen / seen}, (
        f"copy at L = 8 (18 tokens), a 64-row table: rows training reached moved "
        f"{seen:.3f} of their size from init, rows it never reached {unseen:.3g}"
    )


@arena_claim("inv-002-36", id="claim-002-learned-random", about=("learned",),
             rules=(Rule("jump, trained / sinusoid", "<", 2, FAILS),
                    Rule("periodicity, trained / sinusoid", ">", 0.5, FAILS)),
             method="arena, copy at L = 8: the trained table over the 18 positions training "
             "reached, |p_(t+1) - p_t| / |p_t| and the share of each column's power in its top "
             "frequency, against the sinusoid of the same size",
             note="Training moves the rows far from their random init (the drift above), yet "
             "neighbouring rows stay unrelated: nothing in training ties position t to "
             "t + 1.")  # fmt: skip
def claim_002_learned_random(ev: Evidence):
    rows, width = build_task("copy").tokens(8), 64  # the arena's copy model: D = 64
    ref = PF.sinusoidal_table(torch.arange(rows), width)
    jump = ev.at_l(LEARNED_COPY, "copy", "table_jump") / table_jump(ref)
    period = ev.at_l(LEARNED_COPY, "copy", "table_periodicity") / table_periodicity(ref)
    drift = ev.at_l(LEARNED_COPY, "copy", "table_drift@seen")
    measured = {"jump, trained / sinusoid": jump, "periodicity, trained / sinusoid": period}
    return measured, (
        f"the trained table's step between neighbouring rows is {jump:.2f}x the sinusoid's, "
        f"its periodicity {period:.2f}x; it moved {drift:.2f} of its size from its init"
    )


@arena_claim("inv-003-01", id="claim-003-fusion", about=("sinusoidal",),
             rules=(Rule("the worse fusion, exact match at L", "<", 0.5, CAVEAT),),
             method="arena, copy at L = 8: the sinusoid concatenated (width 2D, projected back "
             "to D) against added; both are working fusions if each reaches 0.5 exact "
             "match")  # fmt: skip
def claim_003_fusion(ev: Evidence):
    cat, add = ev.at_l(CONCAT, "copy"), ev.at_l("sinusoidal", "copy")
    return {"the worse fusion, exact match at L": min(cat, add)}, (
        f"copy at L = 8, exact match: concatenated [x, p] {cat:.3f}, added x + p {add:.3f}"
    )


@arena_claim("inv-003-02", id="claim-003-long-term", about=("nope", "sinusoidal", "learned"),
             rules=(Rule("best with positions - nope", ">", 0.05, HOLDS),
                    Rule("best with positions - nope", "<", -0.05, FAILS)),
             otherwise=CAVEAT, method="arena, passkey trained at 32, accuracy averaged over "
             "32..256 tokens: the better of the sinusoid and a learned table against no "
             "positions")  # fmt: skip
def claim_003_long_term(ev: Evidence):
    acc = {e: ev.mean(e, "passkey", "accuracy", PASSKEY_LENS)
           for e in ("nope", "sinusoidal", LEARNED_PASSKEY)}  # fmt: skip
    gain = max(acc["sinusoidal"], acc[LEARNED_PASSKEY]) - acc["nope"]
    return {"best with positions - nope": gain}, "passkey, accuracy over 32..256: " + ", ".join(
        f"{e} {a:.3f}" for e, a in acc.items()
    )


@arena_claim("inv-003-07", id="claim-003-learned-data", about=("learned", "sinusoidal"),
             rules=(Rule("learned / sinusoidal loss at 1/8 of training", ">", 1.02, HOLDS),
                    Rule("learned / sinusoidal loss at 1/8 of training", "<", 0.98, FAILS)),
             otherwise=CAVEAT, method="arena, lm at L = 64 (fresh text every step, so data grows "
             "with steps): the learning curves of a learned table and the sinusoid; needs more "
             "data if its loss after 1/8 of the steps is 2% higher or more")  # fmt: skip
def claim_003_learned_data(ev: Evidence):
    at = lambda e, f: ev.get(e, "lm", f"train_loss@{f:g}", 64, 64)  # noqa: E731
    early, end = (at(LEARNED_CURVE, f) / at("sinusoidal", f) for f in (0.125, 1.0))
    return {"learned / sinusoidal loss at 1/8 of training": early}, (
        f"lm at L = 64, training loss learned / sinusoidal: {early:.3f} after 1/8 of the "
        f"steps, {end:.3f} at the end; the table adds 512 x 128 parameters"
    )


@arena_claim("inv-003-13", id="claim-003-bounded-trains", about=("index", "phase"),
             rules=(Rule("index / phase loss at 1/4 of training", ">", 1.05, HOLDS),
                    Rule("index / phase loss at 1/4 of training", "<", 0.95, FAILS)),
             otherwise=CAVEAT, method="arena, copy at L = 8: the unbounded raw index against the "
             "bounded phase t/T (both one concatenated feature); bounded helps if the index's loss "
             "is 5% higher")  # fmt: skip
def claim_003_bounded_trains(ev: Evidence):
    idx, phase = (ev.at_l(e, "copy", "train_loss@0.25") for e in ("index", "phase"))
    acc = ev.at_l("index", "copy"), ev.at_l("phase", "copy")
    return {"index / phase loss at 1/4 of training": idx / phase}, (
        f"copy at L = 8, training loss after 1/4 of the steps: raw index {idx:.3f}, "
        f"phase in [0, 1] {phase:.3f}; final exact match {acc[0]:.3f} / {acc[1]:.3f}"
    )
