"""`posenc explain`: draw and measure what an encoding does, and check the seeds' claims.

    pages.py     explain(name, out): out/index.html + PNG figures beside it, for one encoding;
                 explain_all(out): out/index.html, out/compare.html, out/<name>/index.html
    claims/      the seeds' claims, each checked by a measurement
    figures.py   the figures; page.py the HTML; i18n/ the pages in another language
    cli.py       `posenc explain ...`

Pages open from disk with no network: inline CSS, figures as PNG files next to the page. The
names below are posenc.explain.pages', imported on first use (PEP 562), so that
`posenc explain --help` imports no torch.
"""

from posenc.lazy import lazy_exports

__all__ = lazy_exports(__name__, dict.fromkeys(
    ["FAMILY_ORDER", "Page", "build", "check_sizes", "claims_mod", "compare_html",
     "encoding_html", "explain", "explain_all", "index_html", "load_trained", "registry_key",
     "render_encoding"], "posenc.explain.pages"))  # fmt: skip
