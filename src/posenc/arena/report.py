"""The arena report: DIR/index.html with PNG plots, DIR/results.md, and the published findings
checked against this run's numbers (posenc.arena.findings: computed from the rows)."""

from __future__ import annotations

import html
import os
import shutil
import textwrap

import matplotlib
from matplotlib.figure import Figure

from posenc.arena.config import STOP, backbone_of
from posenc.arena.findings import addition, kazemnejad, ruoss, summary_tables
from posenc.arena.findings_frontier import frontier_findings
from posenc.arena.findings_lm import lm_findings
from posenc.arena.results import ORDER, Results, fmt, main_metric
from posenc.verdict import NOT_MEASURED, markdown, terminal_table, text_table
from posenc.verdict.tables import html_figure, html_rows, write_pages

# recorded once per trained model (posenc.arena.evaluate.trained_rows), not per eval length
BAR_METRICS = ("steps", "learned", "valid@")  # training to the stop: a table and a plot
MODEL_METRICS = ("train_loss@", "table_", "encoding_scale", *BAR_METRICS)


def findings(res: Results):
    """Every published finding as a Claim, in the report's order."""
    return lm_findings(res) + [kazemnejad(res), ruoss(res), addition(res)] + frontier_findings(res)


def tables(res: Results) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) per task and metric."""
    out = []
    for task, L in res.groups:
        lens = res.eval_lens(task, L)
        encs = res.encodings(task, L)
        seeds = max((len(v) for k, v in res.values.items() if k[:2] == (task, L)), default=0)
        for metric in res.metrics(task, L):
            if metric.startswith(("loss@", *MODEL_METRICS)):
                continue
            header = ["encoding"] + [f"{E} ({E / L:g}L)" for E in lens]
            rows = [[enc] + [cell(res, task, L, metric, enc, E) for E in lens] for enc in encs]
            title = f"{task}, L={L}: {metric} (median [min–max] over {seeds} seeds)"
            out.append((title, header, rows))
        bands = [m for m in res.metrics(task, L) if m.startswith("loss@")]
        if bands:
            E = max(lens)
            header = ["encoding"] + [f"positions {m[5:]}" for m in bands]
            rows = [[enc] + [cell(res, task, L, m, enc, E) for m in bands] for enc in encs]
            out.append((f"{task}, L={L}: loss per position band at eval length {E}", header, rows))
        trained = sorted((m for m in res.metrics(task, L) if m.startswith(MODEL_METRICS)
                          and not m.startswith(BAR_METRICS)), key=curve_order)  # fmt: skip
        if trained:  # one value per trained model (evaluate.trained_rows), at eval_len = L
            vals = {(e, m): res.med(task, L, m, e, L) for e in encs for m in trained}
            rows = [[e] + ["–" if vals[e, m] is None else f"{vals[e, m]:.3f}" for m in trained]
                    for e in encs if any(vals[e, m] is not None for m in trained)]  # fmt: skip
            title = f"{task}, L={L}: training (learning curve, learned tables), median"
            out.append((title, ["encoding", *trained], rows))
    return out


def cell(res: Results, task: str, L: int, metric: str, enc: str, E: int, spread=True) -> str:
    """A table's cell: median [min–max] (or the median alone), "n/a" where it cannot run."""
    s = res.stat(task, L, metric, enc, E)
    if s is None and res.is_na(task, L, metric, enc, E):
        return "n/a"
    return fmt(s if spread or s is None else (s[0], s[0], s[0], 1), metric)


def curve_order(metric: str) -> tuple:
    """train_loss@0.125 < @0.25 < ... < @1, then the other per-model metrics by name."""
    head, _, frac = metric.partition("@")
    return (0, float(frac), "") if head == "train_loss" else (1, 0.0, metric)


def style(enc: str) -> dict:
    """A colour and line style of its own for every encoding (zero-shot variants dashed)."""
    i = ORDER.index(enc) if enc in ORDER else len(ORDER) + sum(map(ord, enc))
    ls = "--" if "+" in enc else (":" if enc.startswith("randomized:") else "-")
    markers = "osD^v<>ph*"
    return {"color": matplotlib.colormaps["tab20"](i % 20), "ls": ls, "marker": markers[i % 10]}


def plots(res: Results, out: str) -> list[tuple[str, str]]:
    """PNG files (name, caption): main metric vs eval length, one line per encoding."""
    files = []
    for task, L in res.groups:
        lens = res.eval_lens(task, L)
        for metric, by in ((main_metric(task), "eval"), ("loss@", "band")):
            if by == "band" and not any(m.startswith("loss@") for m in res.metrics(task, L)):
                continue
            encs = res.encodings(task, L)
            # one panel per backbone (posenc's TransformerLM, hf-llama), a label's style shared
            backbones = list(dict.fromkeys(backbone_of(e)[0] for e in encs))
            fig = Figure(figsize=(7 * len(backbones), 4.5))
            panels = fig.subplots(1, len(backbones), sharey=True, squeeze=False)
            for enc in encs:
                backbone, label = backbone_of(enc)
                ax = panels[0][backbones.index(backbone)]
                if by == "eval":
                    pts = [(E, res.stat(task, L, metric, enc, E)) for E in lens]
                else:
                    E = max(lens)
                    pts = [((int(m[5:].split("-")[0]) + int(m.split("-")[1])) / 2,
                            res.stat(task, L, m, enc, E))
                           for m in res.metrics(task, L) if m.startswith("loss@")]  # fmt: skip
                pts = [(x, *s[:3]) for x, s in pts if s is not None]
                if not pts:
                    continue
                xs, med, lo, hi = zip(*pts, strict=True)
                (line,) = ax.plot(xs, med, ms=3, label=label, **style(label))
                ax.fill_between(xs, lo, hi, alpha=0.12, color=line.get_color())
            for backbone, ax in zip(backbones, panels[0], strict=True):
                title = decorate(
                    ax, task, L, metric, by, lens, f"{backbone}: " * (len(panels[0]) > 1)
                )
            kind = "position" if by == "band" else metric
            files.append(save(fig, out, f"{task}_L{L}_{kind}.png", title))
    return files


def bar_plots(res: Results, out: str) -> list[tuple[str, str]]:
    """PNG per task trained to the stop: the validation's lowest exact match over sizes 1..L
    against the step, one line per model (seeds share their encoding's style)."""
    files = []
    for task, L in res.groups:
        curves = sorted({m for m in res.metrics(task, L) if m.startswith("valid@")},
                        key=lambda m: int(m[6:]))  # fmt: skip
        if not curves:
            continue
        fig = Figure(figsize=(7, 4.5))
        ax = fig.subplots()
        for enc in res.encodings(task, L):
            per = [(int(m[6:]), res.per_seed(task, L, m, enc, L)) for m in curves]
            for i, seed in enumerate(sorted({s for _, p in per for s in p})):
                pts = [(step, p[seed]) for step, p in per if seed in p]
                kw = style(enc) | {"marker": None}
                ax.plot(*zip(*pts, strict=True), lw=1, label=enc if i == 0 else None, **kw)
        ax.axhline(STOP, color="gray", lw=0.8, ls=":")
        ax.set_xlabel("training step")
        ax.set_ylabel("validation exact match (lowest over sizes 1..L)")
        title = f"{task}: training to the stop {STOP} (trained at L={L}; one line per seed)"
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, ncol=2)
        ax.grid(alpha=0.3)
        files.append(save(fig, out, f"{task}_L{L}_bar.png", title))
    return files


def save(fig, out: str, name: str, caption: str) -> tuple[str, str]:
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=110)
    return name, caption


def decorate(ax, task: str, L: int, metric: str, by: str, lens, name: str) -> str:
    """Axes, scales, title and legend of one panel; returns its title (without `name`)."""
    if task == "lm":
        ax.set_xscale("log", base=2)
    ax.axvline(L, color="gray", lw=0.8, ls=":")
    if by == "eval":
        unit = {"lm": "tokens", "passkey": "tokens", "addition": "digits"}.get(task, "symbols")
        ax.set_xlabel(f"evaluation length ({unit})")
        ax.set_ylabel(metric)
        if metric == "ppl":
            ax.set_yscale("log")
        title = f"{task}: {metric} vs evaluation length (trained at L={L})"
    else:
        ax.set_xlabel(f"position in a chunk of {max(lens)} tokens")
        ax.set_ylabel("loss (nats/byte)")
        title = f"{task}: loss per position (trained at L={L})"
    ax.set_title(name + title, fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3, which="both")
    return title


def _run_summary(res: Results) -> str:
    rows = res.rows
    wall = {(r["task"], r["encoding"], r["seed"], r["train_len"]): r["wall_time"] for r in rows}
    versions = sorted({(r["posenc_version"], r["torch_version"]) for r in rows})
    v = ", ".join(f"posenc {a} / torch {b}" for a, b in versions)
    return (f"{len(rows)} rows, {len(wall)} cells, {sum(wall.values()) / 60:.1f} min of cell wall "
            f"time; {v}; configs: {len({r['config_hash'] for r in rows})}")  # fmt: skip


def unmeasured_note(found) -> str:
    unmeasured = [f.claim for f in found if f.verdict == NOT_MEASURED]
    return ("Not measured by this run (its tasks or encodings are not in it): "
            + "; ".join(unmeasured) + ".") if unmeasured else ""  # fmt: skip


def terminal_summary(rows: list[dict], width: int = 0) -> str:
    """What `posenc arena` prints at the end: the findings measured, those not, the summary."""
    res = Results(rows)
    found = findings(res) if rows else []
    measured = [f for f in found if f.verdict != NOT_MEASURED]
    width = width or shutil.get_terminal_size((120, 40)).columns
    title = "Published findings (verdicts computed from this run)"
    out = [terminal_table(measured, ("claim", "verdict", "numbers", "rule"), width, title)]
    if note := unmeasured_note(found):
        out.append(textwrap.fill(note, width))
    for title, header, body in summary_tables(res):
        out += ["", text_table(header, body, title=title)]
    return "\n".join(out)


def write_report(rows: list[dict], out: str) -> str:
    """Write DIR/results.md, DIR/index.html and the PNGs; returns the index path."""
    os.makedirs(out, exist_ok=True)
    res = Results(rows)
    found = findings(res) if rows else []
    tabs = summary_tables(res) + tables(res)
    pngs = plots(res, out) + bar_plots(res, out) if rows else []
    # only the findings this run measured; the others in one line under the table
    finding_rows = [[f.claim, f.paper, f.result, f.verdict, f.rule] for f in found
                    if f.verdict != NOT_MEASURED]  # fmt: skip
    note = unmeasured_note(found)
    header = ["published finding", "paper", "this run", "verdict", "rule"]
    summary = _run_summary(res) if rows else "No rows yet."
    md = ["# posenc arena results", "", summary, ""]
    md += ["## Published findings", "", markdown(header, finding_rows), "", note, ""]
    for title, h, r in tabs:
        md += [f"## {title}", "", markdown(h, r), ""]
    md += ["## Plots", ""] + [f"![{c}]({n})" for n, c in pngs] + [""]
    body = [f"<h1>posenc arena</h1><p>{html.escape(summary)}</p><h2>Published findings</h2>",
            html_rows(header, finding_rows), f"<p>{html.escape(note)}</p>"]  # fmt: skip
    body += [html_figure(n, c) for n, c in pngs]
    for title, h, r in tabs:
        body += [f"<h2>{html.escape(title)}</h2>", html_rows(h, r)]
    return write_pages(out, "posenc arena", md, body)


def readme_tables(rows: list[dict], *, verdicts: bool = True) -> str:
    """docs/arena/findings.md's tables (tests/arena keeps the page in step): the findings (unless
    not `verdicts`), the summary tables and lm's median perplexity per length."""
    res = Results(rows)
    found = [[f.claim, f.result, f.verdict] for f in (findings(res) if verdicts else [])
             if f.verdict != NOT_MEASURED]  # fmt: skip
    out = [markdown(["published finding", "this run", "verdict"], found), ""] if found else []
    for title, h, r in summary_tables(res):
        out += [f"{title}:", "", markdown(h, r), ""]
    for task, L in res.groups:
        if task == "lm":
            lens = res.eval_lens(task, L)
            body = [[e] + [cell(res, task, L, "ppl", e, E, spread=False) for E in lens]
                    for e in res.encodings(task, L)]  # fmt: skip
            header = ["encoding"] + [f"{E / L:g}L" if E != L else "L" for E in lens]
            out += [f"lm, L={L} bytes: perplexity (median over seeds):", "",
                    markdown(header, body), ""]  # fmt: skip
    return "\n".join(out).strip() + "\n"
