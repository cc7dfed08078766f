"""The CJK font the Chinese figures use: WenQuanYi Micro Hei (Apache-2.0), shipped in the PyPI
package paperang-p2-fonts-cjk (posenc[lab]); matplotlib reads it from the package's folder, so
nothing is downloaded at run time."""

from __future__ import annotations

from functools import cache
from pathlib import Path

PACKAGE = "paperang_p2_fonts_cjk"
FAMILY = "WenQuanYi Micro Hei"


@cache
def cjk_family() -> list[str]:
    """The font families for a Chinese figure: DejaVu Sans (matplotlib's own) for Latin, Greek
    and math, then the CJK font for the glyphs DejaVu lacks (matplotlib falls back per glyph)."""
    try:
        import paperang_p2_fonts_cjk as pkg
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            "Chinese figures need a CJK font: pip install 'posenc[lab]' "
            "(or pip install paperang-p2-fonts-cjk)",
            name=PACKAGE,
        ) from err
    from matplotlib import font_manager

    files = sorted(Path(pkg.__file__).parent.rglob("*.tt[cf]"))
    if not files:
        raise FileNotFoundError(f"{PACKAGE} holds no font file")
    for f in files:
        font_manager.fontManager.addfont(str(f))
    return ["DejaVu Sans", FAMILY]
