"""What a stretch run found: tables, plots, the published findings and a recommendation.

Perplexity at a length is the geometric mean over the documents that are that long
(exp of the mean loss); retrieval is the exact-match rate over seeds (and depths).

Recommendation for a target length T past the context C (the rule, stated in the report):
a scaling is *eligible* when its short-context cost — the largest relative rise of perplexity
over the unscaled model at the lengths <= C — stays within `tolerance`, and so does its retrieval
loss there (the largest drop of its exact-match rate below the unscaled model's, where retrieval
was measured at lengths <= C); it *works* at T when
its perplexity at T is at most (1 + WORKS) x the unscaled model's at C and, where retrieval
was measured, it retrieves at T at least half as often as the unscaled model does within C.
The recommendation is the eligible scaling that works with the best retrieval at T (then the
lowest perplexity, then the smallest short-context cost), else "none works zero-shot here".
"""

from __future__ import annotations

import html
import json
import math
import os
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from posenc import plots as P
from posenc.stretch.scalings import SCALINGS
from posenc.verdict import (
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    Absent,
    Claim,
    Measured,
    Rule,
    Source,
    finding,
)
from posenc.verdict.tables import html_rows as _html_table
from posenc.verdict.tables import markdown as _md_table

WORKS = 0.10  # perplexity at T within +10% of the unscaled model's at its context


@dataclass
class Grid:
    """The rows of one model, aggregated."""

    model: str
    context: int
    labels: list[str]  # scaling labels, in the order they first appear
    lengths: list[int]
    ppl: dict  # (label, length) -> perplexity over the documents
    docs: dict  # length -> number of documents
    retrieval: dict  # (task, label, length) -> exact-match rate
    depth: dict  # (task, label, length, depth) -> exact-match rate
    tasks: list[str]


def stretch_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if json.loads(r["config"]).get("protocol", "").startswith("stretch")]


def grids(rows: list[dict]) -> list[Grid]:
    """One Grid per model in the rows."""
    by_model = defaultdict(list)
    for r in stretch_rows(rows):
        by_model[r["encoding"].partition(":")[0]].append(r)
    return [_grid(model, rs) for model, rs in by_model.items()]


def _order(label: str) -> tuple:
    """Labels in SCALINGS order, then by their keywords."""
    name = label.partition("(")[0]
    return (SCALINGS.index(name) if name in SCALINGS else len(SCALINGS), label)


def _grid(model: str, rows: list[dict]) -> Grid:
    labels = sorted({r["encoding"].partition(":")[2] for r in rows}, key=_order)
    loss, exact, per_depth = defaultdict(list), defaultdict(list), defaultdict(list)
    for r in rows:
        label, n = r["encoding"].partition(":")[2], r["eval_len"]
        if r["status"] != "ok":
            continue
        if r["task"].startswith("ppl/") and r["metric"] == "loss":
            loss[(label, n)].append(r["value"])
        elif r["metric"] == "exact":
            exact[(r["task"], label, n)].append(r["value"])
        elif r["metric"].startswith("exact@"):
            d = float(r["metric"].partition("@")[2])
            per_depth[(r["task"], label, n, d)].append(r["value"])
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return Grid(
        model=model,
        context=rows[0]["train_len"],
        labels=labels,
        lengths=sorted({r["eval_len"] for r in rows}),
        ppl={k: math.exp(mean(v)) for k, v in loss.items()},
        docs={
            n: max(len(v) for (lb, m), v in loss.items() if m == n) for n in {m for _, m in loss}
        },  # fmt: skip
        retrieval={k: mean(v) for k, v in exact.items()},
        depth={k: mean(v) for k, v in per_depth.items()},
        tasks=sorted({k[0] for k in exact}, key=("passkey", "multikey", "vartrack").index),
    )


# ------------------------------------------------------------------------ what it recommends


def short_cost(g: Grid, label: str) -> float | None:
    """Largest relative perplexity rise over the unscaled model at lengths <= the context."""
    rises = [g.ppl[(label, n)] / g.ppl[("none", n)] - 1 for n in g.lengths
             if n <= g.context and (label, n) in g.ppl and ("none", n) in g.ppl]  # fmt: skip
    return max(rises) if rises else None


def retrieval_loss(g: Grid, label: str) -> float | None:
    """Largest drop of the exact-match rate below the unscaled model's at lengths <= context."""
    drops = [g.retrieval[(t, "none", n)] - g.retrieval[(t, label, n)]
             for t in g.tasks for n in g.lengths if n <= g.context
             and (t, label, n) in g.retrieval and (t, "none", n) in g.retrieval]  # fmt: skip
    return max(drops) if drops else None


def within(g: Grid) -> tuple[float | None, float | None]:
    """The unscaled model's perplexity at the longest length <= context, and its retrieval
    rate over the lengths <= context."""
    inside = [n for n in g.lengths if n <= g.context and ("none", n) in g.ppl]
    ppl = g.ppl[("none", max(inside))] if inside else None
    rates = [g.retrieval[(t, "none", n)] for t in g.tasks for n in g.lengths
             if n <= g.context and (t, "none", n) in g.retrieval]  # fmt: skip
    return ppl, (sum(rates) / len(rates) if rates else None)


def retrieval_at(g: Grid, label: str, n: int) -> float | None:
    rates = [g.retrieval[(t, label, n)] for t in g.tasks if (t, label, n) in g.retrieval]
    return sum(rates) / len(rates) if rates else None


def recommend(g: Grid, tolerance: float) -> list[tuple[int, str, str]]:
    """(length, recommendation, the numbers behind it) for each length past the context."""
    base_ppl, base_ret = within(g)
    out = []
    for n in (m for m in g.lengths if m > g.context):
        cands = []
        for label in g.labels:
            cost, ppl, ret = short_cost(g, label), g.ppl.get((label, n)), retrieval_at(g, label, n)
            if ppl is None:
                continue
            loss = retrieval_loss(g, label)
            eligible = label == "none" or (
                cost is not None and cost <= tolerance and (loss is None or loss <= tolerance)
            )
            works = base_ppl is not None and ppl <= (1 + WORKS) * base_ppl
            if base_ret is not None and ret is not None:
                works = works and ret >= 0.5 * base_ret
            # ties (to 0.01 in perplexity) go to the smaller short-context cost
            cands.append((eligible and works, ret if ret is not None else -1.0, -round(ppl, 2),
                          -(cost or 0.0), label, cost, ppl, loss))  # fmt: skip
        if not cands:
            continue
        ok, ret, _, _, label, cost, ppl, loss = max(cands)
        nums = f"ppl {ppl:.2f}"
        if base_ppl:
            nums += f" (unscaled at {g.context}: {base_ppl:.2f})"
        if ret >= 0:
            nums += f", retrieval {ret:.2f}"
        if cost is not None:
            nums += f", short-context cost {100 * cost:+.1f}%"
        if (loss or 0) > 0:
            nums += f", retrieval lost at <= {g.context}: {loss:.2f}"
        out.append((n, label if ok else "none works zero-shot here", f"best: {label}: {nums}"))
    return out


# ---------------------------------------------------------------------------------- findings


def _lengths(g: Grid):
    """(the longest length <= context, the first past it, the longest if >= 2x context)."""
    inside = max((n for n in g.lengths if n <= g.context), default=None)
    past = min((n for n in g.lengths if n > g.context), default=None)
    far = max(g.lengths) if max(g.lengths) >= 2 * g.context else None
    return inside, past, far


def _ratio(g: Grid, label: str | None, n: int | None) -> float | None:
    """label's perplexity at n over the unscaled model's at the longest length <= context."""
    inside = _lengths(g)[0]
    if label is None or n is None or ("none", inside) not in g.ppl or (label, n) not in g.ppl:
        return None
    return g.ppl[(label, n)] / g.ppl[("none", inside)]


def _first(g: Grid, prefix: str) -> str | None:
    return next((lb for lb in g.labels if lb.partition("(")[0] == prefix), None)


def _need(**values) -> None:
    missing = [k for k, v in values.items() if v is None]
    if missing:
        raise Absent(f"needs {', '.join(missing)} (its scalings or lengths are not in this run)")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f}%"


@finding(
    id="stretch-direct-extrapolation",
    claim="Direct extrapolation past the trained context fails: perplexity rises sharply and "
    "retrieval collapses",
    source=Source(paper="Chen et al. 2023 (PI): LLaMA 7B at 2048, ppl > 10^3 by ~2.5k tokens; "
                  "passkey retrieval to chance"),
    rules=(Rule("ppl_ratio", "<", 1.5, NOT_REPRODUCED),
           Rule("retrieval_past", ">", 0.5, NOT_REPRODUCED)),
    otherwise=REPRODUCED, absent=NOT_MEASURED,
)  # fmt: skip
def direct_extrapolation(g: Grid) -> Measured:
    inside, past, far = _lengths(g)
    n = far or past
    ppl_ratio = _ratio(g, "none", n)
    _need(ppl_ratio=ppl_ratio)
    ret = retrieval_at(
        g,
        "none",
        max(
            (m for m in g.lengths if m > g.context and retrieval_at(g, "none", m) is not None),
            default=n,
        ),
    )
    text = f"unscaled ppl at {n} / at {inside} = {ppl_ratio:.2f}"
    if ret is not None:
        text += f"; its retrieval past the context: {ret:.2f}"
    return Measured(measured={"ppl_ratio": ppl_ratio, "retrieval_past": ret}, result=text)


@finding(
    id="stretch-pi-short-cost",
    claim="Position interpolation without fine-tuning costs quality within the original context",
    source=Source(paper="Chen et al. 2023: interpolated positions degrade perplexity at short "
                  "lengths until ~1000 fine-tuning steps"),
    rules=(Rule("pi_cost", ">=", 0.05, REPRODUCED),), otherwise=NOT_REPRODUCED,
    absent=NOT_MEASURED,
)  # fmt: skip
def pi_short_cost(g: Grid) -> Measured:
    pi = _first(g, "linear")
    cost = short_cost(g, pi) if pi else None
    _need(pi_cost=cost)
    return Measured(
        measured={"pi_cost": cost},
        result=f"{pi}: largest ppl rise at <= {g.context} tokens {_pct(cost)}",
    )


@finding(
    id="stretch-ntk-zero-shot",
    claim="NTK-aware and dynamic NTK scaling extend the context zero-shot with little "
    "short-context cost",
    source=Source(paper="bloc97 2023, emozilla 2023: perplexity near its short-context value to "
                  "~2x (NTK) and beyond (dynamic); dynamic leaves lengths <= the context alone"),
    rules=(Rule("ntk_cost", ">", 0.05, NOT_REPRODUCED),
           Rule("dynamic_cost", ">", 0.05, NOT_REPRODUCED),
           Rule("ntk_long", ">", 1 + WORKS, NOT_REPRODUCED),
           Rule("dynamic_long", ">", 1 + WORKS, NOT_REPRODUCED)),
    otherwise=REPRODUCED, absent=NOT_MEASURED,
)  # fmt: skip
def ntk_zero_shot(g: Grid) -> Measured:
    inside, past, far = _lengths(g)
    n, ntk, dyn = far or past, _first(g, "ntk"), _first(g, "dynamic")
    m = {"ntk_cost": short_cost(g, ntk) if ntk else None,
         "dynamic_cost": short_cost(g, dyn) if dyn else None,
         "ntk_long": _ratio(g, ntk, n), "dynamic_long": _ratio(g, dyn, n)}  # fmt: skip
    _need(**m)
    return Measured(measured=m, result=(
        f"short-context cost: ntk {_pct(m['ntk_cost'])}, dynamic {_pct(m['dynamic_cost'])}; "
        f"ppl at {n} / unscaled at {inside}: ntk {m['ntk_long']:.2f}, dynamic "
        f"{m['dynamic_long']:.2f}"))  # fmt: skip


@finding(
    id="stretch-dynamic-yarn",
    claim="Dynamic-YaRN extends the context beyond 2x without fine-tuning",
    source=Source(paper="Peng et al. 2023 (YaRN): Dynamic-YaRN keeps LLaMA's perplexity low past "
                  "2x its context with no fine-tuning"),
    rules=(Rule("dynamic_yarn_far", ">", 1 + WORKS, NOT_REPRODUCED),
           Rule("retrieval_share", "<", 0.5, NOT_REPRODUCED)),
    otherwise=REPRODUCED, absent=NOT_MEASURED,
)  # fmt: skip
def dynamic_yarn(g: Grid) -> Measured:
    inside, _, far = _lengths(g)
    dy = _first(g, "dynamic_yarn")
    ratio = _ratio(g, dy, far)
    _need(dynamic_yarn_far=ratio)
    base, ret = within(g)[1], retrieval_at(g, dy, far)
    share = ret / base if ret is not None and base else None
    text = f"dynamic_yarn ppl at {far} / unscaled at {inside}: {ratio:.2f}"
    if share is not None:
        text += f"; retrieval at {far}: {ret:.2f} ({share:.2f} of the unscaled model's within)"
    return Measured(measured={"dynamic_yarn_far": ratio, "retrieval_share": share}, result=text)


FINDINGS = (direct_extrapolation, pi_short_cost, ntk_zero_shot, dynamic_yarn)


def findings(g: Grid) -> list[Claim]:
    """The published findings on context extension, each decided from this model's numbers."""
    return [check(g) for check in FINDINGS]


# ------------------------------------------------------------------------------------ tables


def _f(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def tables(g: Grid, tolerance: float) -> list[tuple[str, list[str], list[list[str]]]]:
    out = []
    head = ["scaling"] + [f"{n}" + (" (C)" if n == g.context else "") for n in g.lengths]
    head += ["short-context cost"]
    rows = [[lb] + [_f(g.ppl.get((lb, n))) for n in g.lengths]
            + [("–" if (c := short_cost(g, lb)) is None else f"{100 * c:+.1f}%")]
            for lb in g.labels]  # fmt: skip
    docs = ", ".join(f"{n}: {g.docs.get(n, 0)}" for n in g.lengths)
    out.append((f"Perplexity by length (documents per length: {docs})", head, rows))
    for t in g.tasks:
        lens = [n for n in g.lengths if any((t, lb, n) in g.retrieval for lb in g.labels)]
        rows = [[lb] + [_f(g.retrieval.get((t, lb, n))) for n in lens] for lb in g.labels]
        h = ["scaling"] + [f"{n}" + (" (C)" if n == g.context else "") for n in lens]
        out.append((f"{t}: exact match by length (mean over depths and seeds)", h, rows))
    rec = [[str(n), r, why] for n, r, why in recommend(g, tolerance)]
    out.append((f"Recommendation per target length (short-context cost <= {100 * tolerance:g}%)",
                ["target", "recommendation", "numbers"], rec))  # fmt: skip
    return out


def terminal(g: Grid, tolerance: float) -> str:
    """The findings and the tables as plain text, for the end of a run."""
    lines = [f"posenc stretch: {g.model} (context {g.context})", ""]
    for title, h, r in tables(g, tolerance):
        lines += [title, _md_table(h, r), ""]
    lines += ["Published findings", _md_table(
        ["finding", "this model", "rule", "verdict"],
        [[f.claim, f.result, f.rule or "–", f.verdict] for f in findings(g)])]  # fmt: skip
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- plots


def plots(g: Grid, out: str) -> list[tuple[str, str]]:
    made = []
    fig = P.figure((7.2, 4.0))
    ax = fig.add_subplot()
    for i, lb in enumerate(g.labels):
        xs = [n for n in g.lengths if (lb, n) in g.ppl]
        style = "-" if i < len(P.COLORS) else "--"
        ax.plot(xs, [g.ppl[(lb, n)] for n in xs], marker="o", label=lb, ls=style,
                color=P.COLORS[i % len(P.COLORS)])  # fmt: skip
    ax.axvline(g.context, color="k", ls=":", lw=1)
    ax.set_yscale("log")
    ax.set(
        xlabel="length (tokens)",
        ylabel="perplexity",
        title=f"{g.model}: perplexity of the first T tokens (context {g.context}, dotted)",
    )
    ax.legend(ncols=2)
    name = f"{g.model}_ppl.png"
    P.save(fig, os.path.join(out, name))
    made.append((name, "perplexity against length, one line per scaling"))
    for t in g.tasks:
        depths = sorted({k[3] for k in g.depth if k[0] == t})
        cols = min(3, len(g.labels))
        rows = math.ceil(len(g.labels) / cols)
        fig = P.figure((3.0 * cols, 2.4 * rows))
        for i, lb in enumerate(g.labels):
            ax = fig.add_subplot(rows, cols, i + 1)
            m = np.array([[g.depth.get((t, lb, n, d), np.nan) for n in g.lengths] for d in depths])
            ax.imshow(m, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
            ax.set_xticks(range(len(g.lengths)), [f"{n // 1024}k" if n >= 1024 else str(n)
                                                  for n in g.lengths], fontsize=7)  # fmt: skip
            ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths], fontsize=7)
            ax.set_title(lb, fontsize=9)
            ax.grid(False)
            for (y, x), v in np.ndenumerate(m):
                if not np.isnan(v):
                    ax.text(x, y, f"{v:.1f}", ha="center", va="center", fontsize=7,
                            color="w" if v < 0.5 else "k")  # fmt: skip
        fig.suptitle(f"{t}: exact match (rows: depth, columns: length)", fontsize=10)
        name = f"{g.model}_{t}.png"
        P.save(fig, os.path.join(out, name))
        made.append((name, f"{t}: exact match, length x depth, one panel per scaling"))
    return made


def write_report(rows: list[dict], out: str, tolerance: float = 0.05) -> str:
    """Write OUT/results.md, OUT/index.html and the PNGs; returns the index path."""
    os.makedirs(out, exist_ok=True)
    md, body = ["# posenc stretch results", ""], ["<h1>posenc stretch</h1>"]
    for g in grids(rows):
        pngs = plots(g, out)
        found = findings(g)
        md += [f"## {g.model} (context {g.context} tokens)", "", "### Published findings", ""]
        fh = ["published finding", "paper", "this model", "rule", "verdict"]
        fr = [[f.claim, f.paper, f.result, f.rule or "–", f.verdict] for f in found]
        md += [_md_table(fh, fr), ""]
        body += [f"<h2>{html.escape(g.model)} (context {g.context} tokens)</h2>",
                 "<h3>Published findings</h3>", _html_table(fh, fr)]  # fmt: skip
        for title, h, r in tables(g, tolerance):
            md += [f"### {title}", "", _md_table(h, r), ""]
            body += [f"<h3>{html.escape(title)}</h3>", _html_table(h, r)]
        md += [f"![{c}]({n})" for n, c in pngs] + [""]
        body += [f'<figure><img src="{n}" alt="{html.escape(c)}"><figcaption>'
                 f"{html.escape(c)}</figcaption></figure>" for n, c in pngs]  # fmt: skip
    if len(md) == 2:
        md.append("No stretch rows yet.")
    md += ["", __doc__.split("\n\n", 2)[2].strip()]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}img{max-width:100%}"
    )
    index = os.path.join(out, "index.html")
    with open(index, "w") as f:
        f.write(
            f"<!doctype html><html><head><meta charset='utf-8'><title>posenc stretch</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>"
        )
    return index


def json_rows(rows: list[dict]) -> list[dict]:
    """Every row as {model, scaling, factor, task, document, seed, length, metric, value}."""
    out = []
    for r in stretch_rows(rows):
        cfg = json.loads(r["config"])
        model, _, label = r["encoding"].partition(":")
        task, _, doc = r["task"].partition("/")
        out.append({"model": model, "scaling": label,
                    "factor": (cfg.get("scaling") or {}).get("factor"), "task": task,
                    "document": doc or None, "seed": r["seed"], "length": r["eval_len"],
                    "metric": r["metric"], "value": r["value"]})  # fmt: skip
    return out


def readme_tables(rows: list[dict], tolerance: float = 0.05) -> str:
    """The README's stretch tables (findings, perplexity, retrieval, recommendation), generated
    from the recorded database; tests/stretch/test_report.py keeps the README in step."""
    out = []
    for g in grids(rows):
        found = [[f.claim, f.result, f.verdict] for f in findings(g)]
        out += [_md_table(["published finding", "this model", "verdict"], found), ""]
        for title, h, r in tables(g, tolerance):
            out += [f"{title}:", "", _md_table(h, r), ""]
    return "\n".join(out).strip() + "\n"
