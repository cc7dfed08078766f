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
    ["Page", "build", "check_sizes", "claims_mod", "explain", "explain_all", "load_trained",
     "registry_key"], "posenc.explain.pages"))  # fmt: skip
