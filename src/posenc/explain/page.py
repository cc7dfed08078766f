"""HTML for `posenc explain`: one self-contained page style, no scripts, no network."""

from __future__ import annotations

from html import escape

from posenc.analysis import Measure
from posenc.explain.claims import CAVEAT, ERROR, FAILS, HOLDS, UNMEASURED, Claim, Table
from posenc.explain.figures import KINDS, Fig
from posenc.verdict import numbers

CSS = """
:root { --ink:#1d2330; --muted:#5b6475; --line:#dde2ea; --bg:#f6f7f9; --card:#fff;
  --good:#17663a; --good-bg:#e3f4e9; --bad:#9b1c1c; --bad-bg:#fde8e8; --warn:#7a4b00;
  --warn-bg:#fff3d6; --na:#4a5160; --na-bg:#eceff3; --accent:#2457a6; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
  font: 15px/1.5 "DejaVu Sans", "Liberation Sans", Arial, Helvetica, sans-serif; }
header { background:#1d2a44; color:#fff; padding:18px 32px 14px; }
header h1 { margin:0 0 4px; font-size:24px; font-weight:600; }
header p { margin:0; color:#c9d3e6; }
header nav { margin-top:8px; font-size:14px; }
header nav a { color:#9cc0ff; margin-right:18px; }
main { max-width:1240px; margin:0 auto; padding:18px 28px 40px; }
h2 { font-size:19px; margin:28px 0 10px; padding-bottom:4px; border-bottom:2px solid var(--line); }
h3 { font-size:16px; margin:0 0 6px; }
a { color:var(--accent); }
code, pre { font-family:"DejaVu Sans Mono", "Liberation Mono", monospace; font-size:12.5px; }
pre { background:#f1f3f7; border:1px solid var(--line); padding:8px 10px; overflow:auto;
  max-height:260px; margin:8px 0 0; }
table { border-collapse:collapse; background:var(--card); width:100%; }
th, td { border-bottom:1px solid var(--line); padding:5px 9px; text-align:left;
  vertical-align:top; }
th { background:#eef1f6; font-weight:600; font-size:13.5px; }
td.num { font-variant-numeric:tabular-nums; text-align:right; white-space:nowrap; }
td.detail { color:var(--muted); font-size:13px; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12.5px;
  font-weight:600; white-space:nowrap; }
.good { background:var(--good-bg); color:var(--good); }
.bad { background:var(--bad-bg); color:var(--bad); }
.warn { background:var(--warn-bg); color:var(--warn); }
.na { background:var(--na-bg); color:var(--na); }
.figs { display:grid; grid-template-columns:repeat(auto-fill, minmax(560px, 1fr)); gap:16px; }
figure { margin:0; background:var(--card); border:1px solid var(--line); border-radius:6px;
  padding:10px; }
figure img { display:block; width:100%; height:auto; }
figcaption { color:var(--muted); font-size:13px; margin-top:6px; }
figcaption b { color:var(--ink); }
.claim { background:var(--card); border:1px solid var(--line); border-left:5px solid #aab;
  border-radius:6px; padding:10px 14px; margin:0 0 12px; }
.claim.v-good { border-left-color:#2f9e5b; } .claim.v-bad { border-left-color:#d64545; }
.claim.v-warn { border-left-color:#e0a020; }
.claim blockquote { margin:4px 0 6px; font-style:italic; }
.claim .seed { font-family:"DejaVu Sans Mono", monospace; font-size:12.5px; color:var(--muted); }
.claim dl { display:grid; grid-template-columns:110px 1fr; gap:2px 10px; margin:6px 0 0; }
.claim dt { color:var(--muted); font-size:13.5px; }
.claim dd { margin:0; }
.claim table { margin-top:8px; font-size:13.5px; }
.claim caption { caption-side:top; text-align:left; color:var(--muted); font-size:13px;
  padding:2px 0; }
details { margin-top:10px; }
summary { cursor:pointer; color:var(--accent); }
.meta { color:var(--muted); font-size:13px; }
table.grid { font-size:13.5px; } table.grid th, table.grid td { padding:4px 6px; }
table.grid .badge { white-space:normal; }
"""

VERDICT_CLASS = {HOLDS: "good", FAILS: "bad", CAVEAT: "warn", ERROR: "bad"}


def badge(text: str, cls: str) -> str:
    return f'<span class="badge {cls}">{escape(text)}</span>'


GOOD_CLASS = {True: "good", False: "bad", None: "na"}


def measure_badge(m: Measure, text: str | None = None) -> str:
    """The verdict (or `text`) coloured by whether the property holds."""
    return badge(m.verdict if text is None else text, GOOD_CLASS[m.good])


def document(title: str, subtitle: str, nav: list[tuple[str, str]], body: str) -> str:
    links = "".join(f'<a href="{escape(href)}">{escape(text)}</a>' for text, href in nav)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p>"
        + (f"<nav>{links}</nav>" if links else "")
        + f"</header><main>{body}</main></body></html>\n"
    )


def measures_table(measures: list[Measure]) -> str:
    rows = "".join(
        f'<tr><td>{escape(m.name)}</td><td class="num">'
        f"{'–' if m.value is None else escape(f'{m.value:.4g}')}</td>"
        f'<td>{measure_badge(m)}</td><td class="detail">{escape(m.detail)}</td></tr>'
        for m in measures
    )
    return (
        '<table class="measures"><thead><tr><th>property</th><th>value</th><th>verdict</th>'
        f"<th>how it was measured</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def figure_html(fig: Fig, prefix: str = "", title: str | None = None, anchor: str = "") -> str:
    title = title or KINDS[fig.kind]
    anchor = anchor or f"fig-{fig.kind}"
    size = f' width="{fig.width}" height="{fig.height}"' if fig.width else ""
    return (
        f'<figure id="{escape(anchor)}"><img src="{escape(prefix + fig.file)}"{size} '
        f'alt="{escape(title)}"><figcaption><b>{escape(title)}.</b> '
        f"{escape(fig.caption)}</figcaption></figure>"
    )


def table_html(t: Table) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in t.header)
    rows = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in t.rows)
    cap = f"<caption>{escape(t.caption)}</caption>" if t.caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def claim_html(c: Claim) -> str:
    cls = VERDICT_CLASS.get(c.verdict, "na")
    tables = "".join(table_html(t) for t in c.tables)
    code = (
        f"<details><summary>the seed's code</summary><pre>{escape(c.code)}</pre></details>"
        if c.code
        else ""
    )
    note = f"<dt>why</dt><dd>{escape(c.note)}</dd>" if c.note else ""
    if c.rules:  # the numbers the verdict reads and the rule that reads them
        shown = "; ".join(k + " = " + ("absent" if v is None else f"{v:.4g}")
                          for k, v in c.measured.items())  # fmt: skip
        note = f"<dt>rule</dt><dd>{escape(c.rule)} ({escape(shown or numbers(c))})</dd>" + note
    return (
        f'<div class="claim v-{cls}" id="{escape(c.id)}">'
        f'<div class="seed">seed {escape(c.seed)}'
        + (f", line {c.line}" if c.line else "")
        + "</div>"
        f"<blockquote>“{escape(c.claim)}”</blockquote>"
        f"<dl><dt>verdict</dt><dd>{badge(c.verdict, cls)}</dd>"
        f"<dt>measured</dt><dd>{escape(c.method)}</dd>"
        f"<dt>result</dt><dd>{escape(c.result)}</dd>{note}</dl>{tables}{code}</div>"
    )


def claims_section(claims: list[Claim], intro: str = "") -> str:
    counts = {v: sum(c.verdict == v for c in claims) for v in (HOLDS, CAVEAT, FAILS, ERROR)}
    tally = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    head = f'<p class="meta">{escape(intro)} {escape(tally)}.</p>' if claims else ""
    return head + "".join(claim_html(c) for c in claims)


def inventory_section(items, claims: list[Claim]) -> str:
    """Every inventoried claim of the seeds: its verdict (linked to its check), how it would
    be measured, or why it cannot be; a tally first."""
    verdicts = {c.id: c.verdict for c in claims}
    rows = []
    for it in items:
        if it.check:
            v = verdicts.get(it.check, UNMEASURED)
            status = f'<a href="#{escape(it.check)}">{badge(v, VERDICT_CLASS.get(v, "na"))}</a>'
        elif it.how:
            status = f"not measured yet: {escape(it.how)}"
        else:
            status = f"not checkable: {escape(it.not_checkable)}"
        rows.append(
            f"<tr><td>{escape(it.id)}</td><td>{escape(it.quote)}</td><td>{escape(it.claim)}</td>"
            f"<td>{status}</td></tr>"
        )
    checked = sum(bool(it.check) for it in items)
    todo = sum(bool(it.how) for it in items)
    head = (
        f'<p class="meta">{len(items)} claims in the five seeds: {checked} checked above, '
        f"{todo} not measured yet (how is said), {len(items) - checked - todo} not checkable.</p>"
    )
    table = (
        '<table class="grid"><thead><tr><th>id</th><th>quote</th><th>claim</th><th>status</th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return head + table
