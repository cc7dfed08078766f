"""The 2025 context-extension findings (DroPE, RNoPE-SWA) against the run's `rope`, on passkey
and lm: each needs, on every task decided, to beat RoPE past L (passkey: mean exact match; lm:
mean perplexity) and keep quality at L (passkey: >= BAR; lm: perplexity within KEEP of RoPE's).
A task whose RoPE model is below BAR at L is inconclusive.
"""

from __future__ import annotations

from posenc.arena.findings import BAR, at_L, group, mean_over, published, show
from posenc.arena.results import Results, main_metric
from posenc.verdict import INCONCLUSIVE, NOT_REPRODUCED, Absent, Claim, Measured, Rule

TASKS = ("passkey", "lm")
KEEP = 1.05  # lm: perplexity at L within 5% of RoPE's counts as kept


def past_L(res: Results, task: str, L: int, enc: str):
    """Per seed, the mean of the main metric over the evaluated lengths past L -> spread."""
    lens = [E for E in res.eval_lens(task, L) if E > L]
    return mean_over(res, task, L, enc, main_metric(task), lens)


def versus_rope(res: Results, label: str) -> Measured:
    """`label` against `rope` (and `nope`, shown) on each task both ran."""
    parts, verdicts = [], []
    for task in TASKS:
        L = group(res, task)
        if L is None or past_L(res, task, L, label) is None or past_L(res, task, L, "rope") is None:
            continue
        acc = main_metric(task) != "ppl"
        at = {e: at_L(res, task, L, e, main_metric(task)) for e in (label, "rope", "nope")}
        far = {e: past_L(res, task, L, e) for e in (label, "rope", "nope")}
        unit = "exact match" if acc else "ppl"
        lens = ", ".join(f"{E / L:g}L" for E in res.eval_lens(task, L) if E > L)
        row = "; ".join(f"{e} {show(at[e])} → {show(far[e])}" for e in at if at[e] is not None)
        part = f"{task} (L={L}, {unit} at L → mean over {lens}): {row}"
        if acc and at["rope"][0] < BAR:
            parts.append(part + f" (rope below {BAR} at L: inconclusive)")
            verdicts.append(None)
            continue
        beats = far[label][0] > far["rope"][0] if acc else far[label][0] < far["rope"][0]
        keeps = at[label][0] >= BAR if acc else at[label][0] <= KEEP * at["rope"][0]
        why = [] if beats else [f"not past L ({show(far[label])} vs rope {show(far['rope'])})"]
        why += [] if keeps else [f"not kept at L ({show(at[label], 3)})"]
        parts.append(part + (f" — {'; '.join(why)}" if why else " — beats rope past L, kept at L"))
        verdicts.append(beats and keeps)
    if not verdicts:
        raise Absent(f"needs {label} and rope on passkey or lm, evaluated past L")
    rule = (f"kept at L = passkey exact match ≥ {BAR} / lm ppl within ×{KEEP} of rope's; "
            "median [min–max] over seeds. ")  # fmt: skip
    result = rule + " | ".join(parts)
    decided = [v for v in verdicts if v is not None]
    return Measured(measured={MEASURED: len(decided), FAILED: decided.count(False)},
                    result=result)  # fmt: skip


MEASURED = "tasks decided (rope learns them)"
FAILED = "tasks where it does not beat rope past L or keep L"
RULES = (Rule(MEASURED, "<", 1, INCONCLUSIVE), Rule(FAILED, ">", 0, NOT_REPRODUCED))


@published(
    "DroPE: dropping RoPE after training and recalibrating briefly extends the context past L, "
    "where keeping RoPE fails, and keeps quality at L",
    "Gelberg et al. 2025 (Sakana AI): zero-shot needle-in-a-haystack retrieval past the "
    "training length where RoPE and its scalings (PI, NTK, YaRN) fail, in-context scores kept, "
    "after recalibrating with < 1% of the pretraining budget",
    rules=RULES,
)
def drope(res: Results) -> Measured:
    return versus_rope(res, "rope+drope")


@published(
    "RNoPE-SWA: RoPE sliding-window layers with a global NoPE layer (3:1) extend the context "
    "past L, where full RoPE fails, and keep quality at L",
    "Yang et al. 2025 (Cohere, 'Rope to Nope and Back Again'; Command A): near-perfect needle "
    "retrieval far past the training length, short-context benchmarks competitive with "
    "full-attention RoPE",
    rules=RULES,
)
def rnope_swa(res: Results) -> Measured:
    return versus_rope(res, "rnope-swa")


def frontier_findings(res: Results) -> list[Claim]:
    return [drope(res), rnope_swa(res)]
