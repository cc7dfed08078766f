"""The verdict engine's renderers: a checked claim (posenc.verdict.Claim) as a row of a table
for the terminal, markdown (the README, results.md) or HTML. They read a claim's fields only."""

from __future__ import annotations

import html
import os
import textwrap
from collections.abc import Callable


def numbers(c, digits: int = 3) -> str:
    """ "name = value; ..." of the numbers the verdict reads; timings are left out (they move
    between runs: a generated table must regenerate to the same text)."""
    parts = []
    for k, v in c.measured.items():
        if k in c.timings:
            parts.append(f"{k}: a timing (on the page)")
        else:
            parts.append(f"{k} = " + ("absent" if v is None else f"{v:.{digits}g}"))
    return "; ".join(parts) or c.result


def where(c) -> str:
    """The claim's source in a few characters: "000:12" (seed and line) or the paper."""
    if c.seed:
        return f"{c.seed[:3]}:{c.line}" if c.line else c.seed[:3]
    return c.paper.split(":")[0]


COLUMNS: dict[str, Callable[[object], str]] = {
    "source": where,
    "claim": lambda c: c.claim,
    "verdict": lambda c: c.verdict,
    "numbers": numbers,
    "rule": lambda c: c.rule or c.result,
    "result": lambda c: c.result,
}


def rows(claims, columns) -> list[list[str]]:
    return [[COLUMNS[k](c) for k in columns] for c in claims]


def terminal_table(claims, columns=("claim", "verdict", "numbers", "rule"), width: int = 0,
                   title: str = "") -> str:  # fmt: skip
    """A plain-text table for the terminal; with `width` > 0 each cell wraps at width // columns
    characters (the verdict never wraps)."""
    return text_table(list(columns), rows(claims, columns), width=width, title=title)


def text_table(header: list[str], body: list[list[str]], width: int = 0, title: str = "") -> str:
    """Columns aligned with two spaces; with `width` > 0 the cells wrap so that a line fits
    in it, the verdict and short columns unwrapped."""
    table = [header, *body]
    natural = [max(len(str(r[i])) for r in table) for i in range(len(header))]
    cells = list(natural)
    if width:
        keep = [i for i, h in enumerate(header) if h == "verdict" or natural[i] <= 12]
        room = width - 2 * (len(header) - 1) - sum(natural[i] for i in keep)
        wrap = [i for i in range(len(header)) if i not in keep]
        for i in wrap:
            cells[i] = max(12, room // max(len(wrap), 1))
    wrapped = [[textwrap.wrap(str(c), cells[i]) or [""] for i, c in enumerate(r)] for r in table]
    widths = [max(len(line) for r in wrapped for line in r[i]) for i in range(len(header))]
    out = [title] if title else []
    for r in wrapped:
        for k in range(max(len(c) for c in r)):
            parts = [(c[k] if k < len(c) else "").ljust(w) for c, w in zip(r, widths, strict=True)]
            out.append("  ".join(parts).rstrip())
    return "\n".join(out)


def md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(map(md_cell, header)) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(md_cell, r)) + " |" for r in body])


def markdown_table(claims, columns=("source", "claim", "verdict", "numbers")) -> str:
    return markdown(list(columns), rows(claims, columns))


def html_rows(header: list[str], body: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    tr = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in body
    )
    return f"<table><tr>{th}</tr>{tr}</table>"


def html_table(claims, columns=("claim", "verdict", "numbers", "rule")) -> str:
    return html_rows(list(columns), rows(claims, columns))


STYLE = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
    "table{border-collapse:collapse;margin:1em 0;font-size:13px}"
    "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}"
    "img{max-width:100%}figure{margin:1em 0}"
)


def html_figure(name: str, caption: str) -> str:
    c = html.escape(caption)
    return f'<figure><img src="{name}" alt="{c}"><figcaption>{c}</figcaption></figure>'


def write_pages(out: str, title: str, md: list[str], body: list[str]) -> str:
    """A report's OUT/results.md (the lines `md`) and OUT/index.html (the HTML parts `body` in
    one page shell and style: the arena's, stretch's); returns the index path."""
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md))
    index = os.path.join(out, "index.html")
    with open(index, "w") as f:
        f.write(
            f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>"
        )
    return index
