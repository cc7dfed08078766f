"""HTML for `posenc explain`: one self-contained page style, no scripts, no network."""

from __future__ import annotations

from html import escape

from posenc.analysis import Measure
from posenc.explain import i18n
from posenc.explain.claims import CAVEAT, ERROR, FAILS, HOLDS, UNMEASURED, Claim, Table, inventory
from posenc.explain.claims.base import seed_sentence
from posenc.explain.figures import KINDS, Fig
from posenc.explain.i18n import tr
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
CSS_ZH = """
body { font-family: "DejaVu Sans", "Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei",
  "PingFang SC", "Microsoft YaHei", sans-serif; }
.claim blockquote { font-style:normal; }
"""
HTML_LANG = {"en": "en", "zh": "zh-CN"}

VERDICT_CLASS = {HOLDS: "good", FAILS: "bad", CAVEAT: "warn", ERROR: "bad"}


def badge(text: str, cls: str) -> str:
    return f'<span class="badge {cls}">{escape(text)}</span>'


GOOD_CLASS = {True: "good", False: "bad", None: "na"}


def measure_badge(m: Measure, text: str | None = None, lang: str = "en") -> str:
    """The verdict (or `text`) coloured by whether the property holds."""
    return badge(tr(m.verdict, lang) if text is None else text, GOOD_CLASS[m.good])


def document(title: str, subtitle: str, nav: list[tuple[str, str]], body: str,
             lang: str = "en") -> str:  # fmt: skip
    links = "".join(f'<a href="{escape(href)}">{escape(text)}</a>' for text, href in nav)
    css = CSS + (CSS_ZH if lang == "zh" else "")
    return (
        f'<!DOCTYPE html>\n<html lang="{HTML_LANG[lang]}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{css}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p>"
        + (f"<nav>{links}</nav>" if links else "")
        + f"</header><main>{body}</main></body></html>\n"
    )


def html_table(header, rows: str, lang: str, cls: str = "", caption: str = "") -> str:
    """A <table> of `rows` (<tr> HTML) under `header`, its texts in `lang`."""
    th = "".join(f"<th>{escape(tr(h, lang))}</th>" for h in header)
    cap = f"<caption>{escape(tr(caption, lang))}</caption>" if caption else ""
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}>{cap}<thead><tr>{th}</tr></thead><tbody>{rows}</tbody></table>"


def measures_table(measures: list[Measure], lang: str = "en") -> str:
    rows = "".join(
        f'<tr><td>{escape(tr(m.name, lang))}</td><td class="num">'
        f"{'–' if m.value is None else escape(f'{m.value:.4g}')}</td>"
        f"<td>{measure_badge(m, lang=lang)}</td>"
        f'<td class="detail">{escape(tr(m.detail, lang))}</td></tr>'
        for m in measures
    )
    header = ("property", "value", "verdict", "how it was measured")
    return html_table(header, rows, lang, "measures")


def figure_html(fig: Fig, prefix: str = "", title: str | None = None, anchor: str = "",
                lang: str = "en") -> str:  # fmt: skip
    title = title or tr(KINDS[fig.kind], lang)
    anchor = anchor or f"fig-{fig.kind}"
    size = f' width="{fig.width}" height="{fig.height}"' if fig.width else ""
    return (
        f'<figure id="{escape(anchor)}"><img src="{escape(prefix + fig.file)}"{size} '
        f'alt="{escape(title)}"><figcaption><b>{escape(title)}.</b> '
        f"{escape(tr(fig.caption, lang))}</figcaption></figure>"
    )


def table_html(t: Table, lang: str = "en") -> str:
    rows = "".join("<tr>" + "".join(f"<td>{escape(tr(c, lang))}</td>" for c in r) + "</tr>"
                   for r in t.rows)  # fmt: skip
    return html_table(t.header, rows, lang, caption=t.caption)


SEED_CODE = "the seed's code"


def claim_html(c: Claim, lang: str = "en") -> str:
    """A checked claim: the seed's words (English pages: their English wording; other
    languages: the tutorial's own sentence, from the seed file at its line), the verdict, what
    was measured, the numbers and the rule that read them."""
    cls = VERDICT_CLASS.get(c.verdict, "na")
    tables = "".join(table_html(t, lang) for t in c.tables)
    code = (
        f"<details><summary>{tr(SEED_CODE, lang)}</summary><pre>{escape(c.code)}</pre></details>"
        if c.code
        else ""
    )
    note = f"<dt>{tr('why', lang)}</dt><dd>{escape(tr(c.note, lang))}</dd>" if c.note else ""
    if c.rules:  # the numbers the verdict reads and the rule that reads them
        shown = "; ".join(tr(k, lang) + " = " + (tr("absent", lang) if v is None else f"{v:.4g}")
                          for k, v in c.measured.items())  # fmt: skip
        rule = c.rule if lang == "en" else i18n.rule_text(c.rules, c.otherwise, lang)
        said = i18n.fmt("{rule} ({numbers})", lang, rule=rule, numbers=shown or numbers(c))
        note = f"<dt>{tr('rule', lang)}</dt><dd>{escape(said)}</dd>" + note
    said = c.claim if lang == "en" or not c.seed else seed_sentence(c.seed, c.quote)
    return (
        f'<div class="claim v-{cls}" id="{escape(c.id)}">'
        f'<div class="seed">{escape(i18n.where_text(c.seed, c.line, lang))}</div>'
        f"<blockquote{'' if lang == 'en' else ' class=src'}>“{escape(said)}”</blockquote>"
        f"<dl><dt>{tr('verdict', lang)}</dt><dd>{badge(tr(c.verdict, lang), cls)}</dd>"
        f"<dt>{tr('measured', lang)}</dt><dd>{escape(tr(c.method, lang))}</dd>"
        f"<dt>{tr('result', lang)}</dt><dd>{escape(tr(c.result, lang))}</dd>{note}</dl>"
        f"{tables}{code}</div>"
    )


def claims_section(claims: list[Claim], intro: str = "", lang: str = "en") -> str:
    counts = {v: sum(c.verdict == v for c in claims) for v in (HOLDS, CAVEAT, FAILS, ERROR)}
    each = [i18n.fmt("{n} {verdict}", lang, n=n, verdict=tr(v, lang)) for v, n in counts.items()
            if n]  # fmt: skip
    tally = i18n.fmt(", ", lang).join(each)
    space, stop = (" ", ".") if lang == "en" else ("", "。")
    head = f'<p class="meta">{escape(intro)}{space}{escape(tally)}{stop}</p>' if claims else ""
    return head + "".join(claim_html(c, lang) for c in claims)


def inventory_section(items, claims: list[Claim], lang: str = "en") -> str:
    """Every inventoried claim of the seeds: its verdict (linked to its check), how it would
    be measured, or why it cannot be; a tally first. Other languages show the tutorial's
    sentence in place of the English wording."""
    verdicts = {c.id: c.verdict for c in claims}
    src = "" if lang == "en" else ' class="src"'  # the tutorial's own words
    rows = []
    for it in items:
        if it.check:
            v = verdicts.get(it.check, UNMEASURED)
            status = (f'<a href="#{escape(it.check)}">'
                      f'{badge(tr(v, lang), VERDICT_CLASS.get(v, "na"))}</a>')  # fmt: skip
        elif it.how:
            status = f"{tr('not measured yet:', lang)} {escape(tr(it.how, lang))}"
        else:
            status = f"{tr('not checkable:', lang)} {escape(tr(it.not_checkable, lang))}"
        said = it.claim if lang == "en" else seed_sentence(inventory.SEED_OF[it.id], it.quote)
        rows.append(
            f"<tr><td>{escape(it.id)}</td><td{src}>{escape(it.quote)}</td><td{src}>{escape(said)}</td>"
            f"<td>{status}</td></tr>"
        )
    checked = sum(bool(it.check) for it in items)
    todo = sum(bool(it.how) for it in items)
    n_not = len(items) - checked - todo
    tally = (f"{len(items)} claims in the five seeds: {checked} checked above, {todo} not "
             f"measured yet (how is said), {n_not} not checkable.")  # fmt: skip
    head = f'<p class="meta">{escape(tr(tally, lang))}</p>'
    cols = ("id", "quote", "claim" if lang == "en" else "the tutorial’s sentence", "status")
    return head + html_table(cols, "".join(rows), lang, "grid")
