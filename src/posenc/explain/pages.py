"""The pages of `posenc explain` (see posenc.explain): one encoding's, and every encoding's."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import torch

import posenc
from posenc import analysis
from posenc.analysis import Measure
from posenc.explain import claims as claims_mod
from posenc.explain import figures, page
from posenc.explain.claims import Claim, inventory
from posenc.explain.figures import KINDS, Fig
from posenc.explain.i18n import check_lang, fmt, tr
from posenc.model import TransformerLM


@dataclass
class Page:
    name: str
    cls: type
    measures: list[Measure]
    figs: list[Fig]
    trained_measures: list[Measure] = field(default_factory=list)
    checkpoint: str | None = None
    claims: list[Claim] = field(default_factory=list)  # all the seeds' claims, as checked


def registry_key(name: str) -> str:
    """The registry name of `name` (ValueError with close matches if unknown)."""
    posenc.resolve(name)
    return name.strip().lower().replace("-", "_")


def check_sizes(dim: int, heads: int, max_pos: int) -> None:
    if not isinstance(dim, int) or dim < 4 or dim % 2:
        raise ValueError(f"--dim must be an even integer >= 4, got {dim!r}")
    if not isinstance(heads, int) or not 1 <= heads <= 64:
        raise ValueError(f"--heads must be an integer in 1..64, got {heads!r}")
    if not isinstance(max_pos, int) or not 16 <= max_pos <= 2048:
        raise ValueError(f"--max-pos must be an integer in 16..2048, got {max_pos!r}")


def build(name: str, *, dim: int, heads: int, max_pos: int):
    """The encoding as the page shows it: seed 0, head_dim = dim, table length max_pos; an
    encoding that needs its length (onehot: the vector's) gets max_len = max_pos."""
    sizes = dict(dim=dim, heads=heads, head_dim=dim, train_len=max_pos)
    torch.manual_seed(0)
    try:
        return posenc.build(name, **sizes).eval()
    except ValueError as err:
        if not str(err).startswith("max_len is required"):
            raise
    torch.manual_seed(0)
    return posenc.build(name, **sizes, max_len=max_pos).eval()


def load_trained(path: str | Path, name: str, max_pos: int):
    """(encoding, probe dim, heads, length) from a TransformerLM checkpoint."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"--checkpoint not found: {path}")
    model = TransformerLM.from_checkpoint(path).eval()
    cfg = model.config
    if registry_key(cfg["encoding"]) != name:
        raise ValueError(
            f"--checkpoint {path} holds a model with encoding {cfg['encoding']!r}, "
            f"not {name!r}: run `posenc explain {cfg['encoding']} --checkpoint {path}`"
        )
    enc = model.encodings[0]
    probe_dim = cfg["dim"] if "embed" in enc.provides else cfg["dim"] // cfg["heads"]
    return enc, probe_dim, cfg["heads"], cfg.get("max_len") or max_pos


def render_encoding(
    name: str,
    out: Path,
    claims: list[Claim],
    *,
    dim: int,
    heads: int,
    max_pos: int,
    standalone: bool,
    checkpoint: str | Path | None = None,
    trained: tuple | None = None,
    lang: str = "en",
) -> Page:
    """Measure and draw one encoding into `out` (and `trained`, load_trained's from
    `checkpoint`), then write its out/index.html."""
    enc = build(name, dim=dim, heads=heads, max_pos=max_pos)
    out.mkdir(parents=True, exist_ok=True)  # input checked: now write
    measures = analysis.measure(enc, name, dim=dim, heads=heads, max_pos=max_pos)
    figs = figures.draw(enc, name, out, dim=dim, heads=heads, max_pos=max_pos, lang=lang)
    pg = Page(name, type(enc), measures, figs, claims=claims)
    if trained is not None:
        tenc, tdim, theads, tlen = trained
        n = min(tlen, 2048)
        pg.trained_measures = analysis.measure(
            tenc, name, dim=tdim, heads=theads, max_pos=n, permutation=False
        )
        pg.figs += figures.draw(
            tenc, name, out, dim=tdim, heads=theads, max_pos=n, state="trained", lang=lang
        )
        pg.checkpoint = str(checkpoint)
    html = encoding_html(
        pg, dim=dim, heads=heads, max_pos=max_pos, standalone=standalone, lang=lang
    )
    (out / "index.html").write_text(html, encoding="utf-8")
    return pg


def encoding_html(pg: Page, *, dim, heads, max_pos, standalone: bool,
                  lang: str = "en") -> str:  # fmt: skip
    """One encoding's page; every text in `lang` (the numbers are pg's, whatever the language)."""
    cls = pg.cls
    meta = fmt("family: <b>{family}</b> · paper: {paper} · dim {dim}, heads {heads}, positions "
               "0..{last}", lang, family=escape(tr(cls.family, lang)), paper=escape(cls.paper),
               dim=dim, heads=heads, last=max_pos - 1)  # fmt: skip
    if cls.trainable:
        meta += tr(" · trainable: figures show the initial state (seed 0)", lang)
    body = [
        f"<p>{escape(tr(cls.summary, lang))}</p>",
        f'<p class="meta">{meta}</p>',
        f'<h2 id="properties">{tr("Measured properties", lang)}</h2>',
        page.measures_table(pg.measures, lang),
    ]
    if pg.trained_measures:
        body += [
            f'<h2 id="trained-properties">{tr("Measured properties, trained", lang)} '
            f"({escape(Path(pg.checkpoint).name)})</h2>",
            page.measures_table(pg.trained_measures, lang),
        ]
    body.append(f'<h2 id="figures">{tr("Figures", lang)}</h2><div class="figs">')
    body += [page.figure_html(f, lang=lang) for f in pg.figs]
    body.append("</div>")
    mine = [c for c in pg.claims if pg.name in c.about]
    others = [c for c in pg.claims if pg.name not in c.about]
    body.append(f'<h2 id="claims">{tr("Claims of the seeds", lang)}</h2>')
    if mine:
        intro = fmt("Claims about {name}:", lang, name=pg.name)
        body.append(page.claims_section(mine, intro, lang))
    else:
        none = fmt("No seed makes a claim about {name}.", lang, name=escape(pg.name))
        body.append(f'<p class="meta">{none}</p>')
    if standalone and others:
        more = fmt("the other {n} claims of the seeds", lang, n=len(others))
        body.append(
            f"<details><summary>{more}</summary>"
            + page.claims_section(others, lang=lang)
            + "</details>"
        )
    elif not standalone:
        body.append(
            f'<p><a href="../index.html#claims">{tr("All claims of the seeds", lang)}</a></p>'
        )
    nav = [] if standalone else [(tr("all encodings", lang), "../index.html"),
                                 (tr("compare", lang), "../compare.html")]  # fmt: skip
    return page.document(
        f"posenc explain: {pg.name}",
        f"{cls.__name__} ({tr(cls.family, lang)}) — {cls.paper}",
        nav,
        "".join(body),
        lang,
    )


def explain(
    name: str,
    out: str | Path,
    *,
    dim: int = 64,
    heads: int = 4,
    max_pos: int = 128,
    checkpoint: str | Path | None = None,
    arena: str | Path | None = None,
    lang: str = "en",
) -> Page:
    """Write out/index.html (+ figures) for one encoding, its texts in `lang`; returns what
    was measured. Bad input (name, sizes, checkpoint, --arena, lang) is refused before anything
    is written."""
    check_sizes(dim, heads, max_pos)
    check_lang(lang)
    name = registry_key(name)
    trained = None if checkpoint is None else load_trained(checkpoint, name, max_pos)
    claims = claims_mod.check_all(dim=dim, max_pos=max_pos, arena=arena)
    opts = dict(dim=dim, heads=heads, max_pos=max_pos, checkpoint=checkpoint, trained=trained)
    return render_encoding(name, Path(out), claims, **opts, standalone=True, lang=lang)


def explain_all(
    out: str | Path,
    *,
    dim: int = 64,
    heads: int = 4,
    max_pos: int = 128,
    arena: str | Path | None = None,
    lang: str = "en",
    progress=None,
) -> list[Page]:
    """A page per registered encoding, an index with all claims, and a comparison page.
    progress(names) wraps the loop over the encodings (a bar)."""
    check_sizes(dim, heads, max_pos)
    check_lang(lang)
    out = Path(out)
    claims = claims_mod.check_all(dim=dim, max_pos=max_pos, arena=arena)  # checks --arena first
    out.mkdir(parents=True, exist_ok=True)
    sizes = dict(dim=dim, heads=heads, max_pos=max_pos)
    names = sorted(
        posenc.ENCODINGS, key=lambda n: (FAMILY_ORDER.get(posenc.ENCODINGS[n].family, 9), n)
    )
    pages = []
    for name in progress(names) if progress else names:
        pg = render_encoding(name, out / name, claims, **sizes, standalone=False, lang=lang)
        pages.append(pg)
    (out / "index.html").write_text(index_html(pages, claims, dim, heads, max_pos, lang), "utf-8")
    (out / "compare.html").write_text(compare_html(pages, dim, heads, max_pos, lang), "utf-8")
    return pages


FAMILY_ORDER = {"absolute": 0, "rotary": 1, "bias": 2, "relative": 3, "none": 4}


def grid(pages: list[Page], cell, lang: str, *, family: bool = False) -> str:
    """A table of the encodings (rows) by measured property (columns), cell(m) in each."""
    cols = ["encoding", *(["family"] if family else [])]
    cols += [m.name for m in pages[0].measures] if pages else []
    rows = "".join(
        f'<tr><td><a href="{escape(pg.name)}/index.html">{escape(pg.name)}</a></td>'
        + (f"<td>{escape(tr(pg.cls.family, lang))}</td>" if family else "")
        + "".join(cell(m) for m in pg.measures)
        + "</tr>"
        for pg in pages
    )
    return page.html_table(cols, rows, lang, "grid")


def index_html(pages: list[Page], claims: list[Claim], dim, heads, max_pos, lang="en") -> str:
    def cell(m: Measure) -> str:
        return f'<td title="{escape(tr(m.detail, lang))}">{page.measure_badge(m, lang=lang)}</td>'

    meta = fmt(
        "dim {dim}, heads {heads}, positions 0..{last}. Each encoding has a page of figures and "
        'measurements; <a href="compare.html">the comparison page</a> puts each kind of figure '
        "side by side.", lang, dim=dim, heads=heads, last=max_pos - 1)  # fmt: skip
    intro = tr("What the five tutorials (posenc/explain/seeds/) say, each checked by a "
               "computation.", lang)  # fmt: skip
    body = (
        f'<p class="meta">{meta}</p>'
        f'<h2 id="encodings">{tr("Encodings", lang)}</h2>'
        + grid(pages, cell, lang, family=True)
        + f'<h2 id="claims">{tr("Claims of the seeds", lang)}</h2>'
        + page.claims_section(claims, intro, lang)
        + f'<h2 id="inventory">{tr("Every claim of the seeds", lang)}</h2>'
        + page.inventory_section(inventory.ALL, claims, lang)
    )
    return page.document(
        tr("posenc explain: all encodings", lang),
        fmt("{n} positional encodings, measured and drawn", lang, n=len(pages)),
        [(tr("compare", lang), "compare.html")],
        body,
        lang,
    )


def compare_html(pages: list[Page], dim, heads, max_pos, lang: str = "en") -> str:
    def cell(m: Measure) -> str:
        badge = page.measure_badge(m, "–" if m.value is None else f"{m.value:.3g}")
        return f'<td class="num" title="{escape(tr(m.verdict, lang))}">{badge}</td>'

    legend = tr(
        "Green: the property holds; red: it does not; grey: not applicable. Hover a number for "
        "its verdict; each encoding's page says how it was measured.",
        lang,
    )
    body = [
        f'<h2 id="properties">{tr("Measured properties", lang)}</h2>',
        f'<p class="meta">{escape(legend) if lang != "en" else legend}</p>',
        grid(pages, cell, lang),
    ]
    for kind, title in KINDS.items():
        figs = [(pg, f) for pg in pages for f in pg.figs if f.kind == kind]
        if not figs:
            continue
        body.append(f'<h2 id="kind-{kind}">{escape(tr(title, lang))}</h2><div class="figs">')
        body += [
            page.figure_html(
                f, f"{pg.name}/", title=pg.name, anchor=f"fig-{pg.name}-{kind}", lang=lang
            )  # fmt: skip
            for pg, f in figs
        ]
        body.append("</div>")
    return page.document(
        tr("posenc explain: comparison", lang),
        fmt(
            "each kind of figure for every encoding (dim {dim}, heads {heads}, positions "
            "0..{last})",
            lang,
            dim=dim,
            heads=heads,
            last=max_pos - 1,
        ),  # fmt: skip
        [(tr("all encodings", lang), "index.html")],
        "".join(body),
        lang,
    )
