"""The published findings the arena checks, each a finding of posenc.verdict measured from the
rows: medians over seeds with their [min–max]. An encoding below BAR at L is left out of its
task's verdict (its number shown); a run without the rows leaves a finding "not measured".
"""

from __future__ import annotations

import math
import re
import statistics

from posenc.arena.config import BAR, STOP
from posenc.arena.results import Results
from posenc.verdict import (
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    Absent,
    Measured,
    Rule,
    Source,
    finding,
)

KAZEMNEJAD = ("nope", "t5", "alibi", "rope", "sinusoidal")
KAZEMNEJAD_TASKS = ("copy", "reverse", "sort")
RUOSS_PAIRS = (("randomized:rope", "rope"), ("randomized:sinusoidal", "sinusoidal"))
RUOSS_TASKS = ("copy", "reverse", "sort", "addition")
ADDITION_FACTORS = (1.1, 1.25, 1.5)


def spread(values: list[float]) -> tuple[float, float, float] | None:
    return (statistics.median(values), min(values), max(values)) if values else None


def show(s, digits: int = 2) -> str:
    if s is None:
        return "–"
    med, lo, hi = s
    text = f"{med:.{digits}f}"
    return text if lo == hi else f"{text} [{lo:.{digits}f}–{hi:.{digits}f}]"


def group(res: Results, task: str) -> int | None:
    """The train length of the task's rows (the first, if several)."""
    return next((L for t, L in res.groups if t == task), None)


def at_L(res: Results, task: str, L: int, enc: str, metric: str = "accuracy"):
    return spread(list(res.per_seed(task, L, metric, enc, L).values()))


def mean_over(res: Results, task: str, L: int, enc: str, metric: str, lens):
    """Per seed, the mean of `metric` over the eval lengths `lens`; then median and spread."""
    per = [res.per_seed(task, L, metric, enc, E) for E in lens]
    seeds = set.intersection(*(set(p) for p in per)) if per else set()
    return spread([statistics.mean(p[s] for p in per) for s in sorted(seeds)])


def ood(res: Results, task: str, L: int, enc: str, metric: str):
    """mean_over the sizes L+1..2L."""
    return mean_over(
        res, task, L, enc, metric, [E for E in res.eval_lens(task, L) if L < E <= 2 * L]
    )


def trained(res: Results, task: str, L: int, enc: str) -> bool:
    s = at_L(res, task, L, enc)
    return s is not None and s[0] >= BAR


def published(text: str, paper: str, *, rules, otherwise: str = REPRODUCED):
    """Declare the measurement below as the published finding `text` of `paper`."""
    fid = "finding-" + re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return finding(id=fid, claim=text, source=Source(paper=paper), rules=rules,
                   otherwise=otherwise, absent=NOT_MEASURED)  # fmt: skip


USABLE = "tasks where all five are at the bar"
ABOVE_ALIBI = "min(NoPE, T5) - ALiBi"
ALIBI_ABOVE = "ALiBi - max(RoPE, sinusoidal)"


@published(
    "Copy/reverse/sort out of distribution: NoPE ≈ T5 > ALiBi > RoPE ≈ sinusoidal",
    "Kazemnejad et al. 2023: exact match per length, trained to L, read over L+1..2L; "
    "~100% in distribution first",
    rules=(Rule(USABLE, "<", 1, INCONCLUSIVE), Rule(ABOVE_ALIBI, "<=", 0, NOT_REPRODUCED),
           Rule(ALIBI_ABOVE, "<=", 0, NOT_REPRODUCED)),
)  # fmt: skip
def kazemnejad(res: Results) -> Measured:
    tasks = [(t, group(res, t)) for t in KAZEMNEJAD_TASKS if group(res, t)]
    tasks = [(t, L) for t, L in tasks if all(at_L(res, t, L, e) for e in KAZEMNEJAD)]
    if not tasks:
        raise Absent("needs copy/reverse/sort with " + ", ".join(KAZEMNEJAD))
    parts, usable = [], []
    for t, L in tasks:
        row = []
        for e in KAZEMNEJAD:
            mark = "" if trained(res, t, L, e) else " (below the bar: left out)"
            row.append(f"{e} {show(at_L(res, t, L, e))} → {show(ood(res, t, L, e, 'accuracy'))}"
                       f" / {show(ood(res, t, L, e, 'token_accuracy'))}{mark}")  # fmt: skip
        parts.append(f"{t} (L={L}): " + "; ".join(row))
        if all(trained(res, t, L, e) for e in KAZEMNEJAD):
            usable.append((t, L))
    result = ("exact match at L → mean over L+1..2L of exact match / token accuracy, median "
              "[min–max] over seeds. " + " | ".join(parts))  # fmt: skip
    if not usable:
        return Measured(
            measured={USABLE: 0, ABOVE_ALIBI: None, ALIBI_ABOVE: None},
            result=result + f". No task where all five reach {BAR} at L.",
        )
    for metric in ("accuracy", "token_accuracy"):  # by tokens if ~none extrapolates by exact match
        score = {e: statistics.mean(ood(res, t, L, e, metric)[0] for t, L in usable)
                 for e in KAZEMNEJAD}  # fmt: skip
        if max(score.values()) >= 0.05:
            break
    ranked = " > ".join(f"{e} {score[e]:.3f}" for e in sorted(score, key=score.get, reverse=True))
    by = "exact match" if metric == "accuracy" else "token accuracy"
    result += f". Ranked by {by} over {', '.join(t for t, _ in usable)}: {ranked}"
    top = min(score["nope"], score["t5"])
    bottom = max(score["rope"], score["sinusoidal"])
    if not top > score["alibi"] > bottom:  # which order is broken, in words
        result += (" (NoPE and T5 above RoPE and sinusoidal, ALiBi not between)" if top > bottom
                   else " (NoPE/T5 not above RoPE/sinusoidal)")  # fmt: skip
    return Measured(
        measured={USABLE: len(usable), ABOVE_ALIBI: top - score["alibi"],
                  ALIBI_ABOVE: score["alibi"] - bottom},
        result=result,
    )  # fmt: skip


@published(
    "Randomized positions improve length generalization (RoPE and sinusoidal)",
    "Ruoss et al. 2023: +12.0% mean test accuracy (per token) over 6000 models; "
    "positions a sorted random subset of a longer range",
    rules=(Rule("smallest mean gain in token accuracy", "<=", 0, NOT_REPRODUCED),),
)
def ruoss(res: Results) -> Measured:
    parts, gains = [], {}
    for rnd, base in RUOSS_PAIRS:
        diffs = []
        for t in RUOSS_TASKS:
            L = group(res, t)
            if not L or not at_L(res, t, L, rnd) or not at_L(res, t, L, base):
                continue
            if not (trained(res, t, L, rnd) and trained(res, t, L, base)):
                parts.append(
                    f"{t}: {rnd} {show(at_L(res, t, L, rnd))} / {base} "
                    f"{show(at_L(res, t, L, base))} at L (below the bar: left out)"
                )
                continue  # fmt: skip
            a, b = ood(res, t, L, rnd, "token_accuracy"), ood(res, t, L, base, "token_accuracy")
            diffs.append(a[0] - b[0])
            parts.append(f"{t}: {rnd} {show(a)} vs {base} {show(b)}")
        if diffs:
            gains[rnd] = statistics.mean(diffs)
    if not gains:
        raise Absent(
            "needs trained randomized:rope / randomized:sinusoidal and their bases on an "
            "algorithmic task; " + "; ".join(parts)
        )
    gain = ", ".join(f"{k} {100 * v:+.1f} points" for k, v in gains.items())
    result = f"token accuracy over L+1..2L, median [min–max] over seeds. {'; '.join(parts)}"
    result += f". Mean gain: {gain}"
    return Measured(measured={"smallest mean gain in token accuracy": min(gains.values())},
                    result=result)  # fmt: skip


TRAINED = "encodings at the bar"
HOLDING = "encodings keeping half their accuracy at 1.5×"


@published(
    "Addition extrapolates by at most ~1.25× the trained digits",
    "Kazemnejad et al. 2023: ~1.1–1.25× for every encoding (length = digits)",
    rules=(Rule(TRAINED, "<", 1, INCONCLUSIVE), Rule(HOLDING, ">", 0, NOT_REPRODUCED)),
)
def addition(res: Results) -> Measured:
    L = group(res, "addition")
    if not L:
        raise Absent("needs the addition task")
    sizes = {f: math.ceil(f * L - 1e-9) for f in ADDITION_FACTORS}
    if any(s not in res.eval_lens("addition", L) for s in sizes.values()):
        raise Absent(f"needs eval sizes {sorted(sizes.values())}")
    parts, beyond, learned = [], [], 0
    for e in res.encodings("addition", L):
        base = at_L(res, "addition", L, e)
        if base is None:
            continue
        if base[0] < BAR:
            parts.append(f"{e} {show(base)} at L (below the bar: left out)")
            continue
        learned += 1
        accs = {f: spread(list(res.per_seed("addition", L, "accuracy", e, s).values()))
                for f, s in sizes.items()}  # fmt: skip
        parts.append(f"{e} {show(base)} at L → " + ", ".join(
            f"{show(a)} at {sizes[f]} ({f:g}×)" for f, a in accs.items()))  # fmt: skip
        far = accs[ADDITION_FACTORS[-1]]
        if far is not None and far[0] >= 0.5 * base[0]:
            beyond.append(e)
    result = (f"exact match, L={L} digits, median [min–max] over seeds; holds = keeps half its "
              f"accuracy at L. " + "; ".join(parts))  # fmt: skip
    if learned:
        result += (f". Holds at 1.5×: {', '.join(beyond)}" if beyond
                   else ". No encoding at the bar holds at 1.5×")  # fmt: skip
    return Measured(measured={TRAINED: learned, HOLDING: len(beyond)}, result=result)


def per_task(res: Results, tasks, cell, title: str):
    """[(title, header, rows)]: one row per encoding of `tasks` [(task, L)], one column per
    task, cell(task, L, encoding) -> str; [] without tasks."""
    if not tasks:
        return []
    encs = list(dict.fromkeys(e for t, L in tasks for e in res.encodings(t, L)))
    rows = [[e] + [cell(t, L, e) for t, L in tasks] for e in encs]
    return [(title, ["encoding"] + [f"{t} (L={L})" for t, L in tasks], rows)]


def in_distribution(res: Results) -> list[tuple[str, list[str], list[list[str]]]]:
    def cell(t, L, e):
        s = at_L(res, t, L, e)
        return "–" if s is None else show(s, 3) + ("" if s[0] >= BAR else " ✗")

    tasks = [(t, L) for t, L in res.groups if t != "lm"]
    title = (f"In distribution: exact match at L (median [min–max] over seeds; "
             f"✗ under the bar {BAR})")  # fmt: skip
    return per_task(res, tasks, cell, title)


def past_L(res: Results) -> list[tuple[str, list[str], list[list[str]]]]:
    def cell(t, L, e):
        em, tok = ood(res, t, L, e, "accuracy"), ood(res, t, L, e, "token_accuracy")
        return "–" if em is None or tok is None else f"{em[0]:.2f} / {tok[0]:.2f}"

    tasks = [(t, L) for t, L in res.groups if t != "lm" and res.eval_lens(t, L)[-1] > L]
    title = "Past L: mean over sizes L+1..2L of exact match / token accuracy (median over seeds)"
    return per_task(res, tasks, cell, title)


def to_the_bar(res: Results) -> list[tuple[str, list[str], list[list[str]]]]:
    def cell(t, L, e):
        learned = res.per_seed(t, L, "learned", e, L)
        steps = spread(list(res.per_seed(t, L, "steps", e, L).values()))
        ok = sum(v == 1.0 for v in learned.values())
        return "–" if not learned else f"{ok}/{len(learned)}: {show(steps, 0)}"

    tasks = [(t, L) for t, L in res.groups if "learned" in res.metrics(t, L)]
    title = (f"Learned: seeds that reached the stop ({STOP} at every size 1..L on held-out "
             "instances) / seeds, steps taken (median [min–max]; a seed that did not ran to the "
             "cap, and can still be at the bar)")  # fmt: skip
    return per_task(res, tasks, cell, title)


def summary_tables(res: Results) -> list[tuple[str, list[str], list[list[str]]]]:
    """The tables every report leads with: in distribution, past L, learned (the stop)."""
    return in_distribution(res) + past_L(res) + to_the_bar(res)
