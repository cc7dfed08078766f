"""The HTML of `posenc explain` (posenc.explain.page), and the pages in headless Chromium."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from posenc import explain
from posenc.explain.claims import FAILS, Claim, Table
from posenc.explain.page import claim_html

ARTIFACTS = Path(__file__).resolve().parents[1] / "_artifacts"


def test_claim_html_shows_the_claim_in_english_and_its_check():
    c = Claim(
        id="claim-x",
        seed="000_x.txt",
        quote="原文",
        claim="a <claim>",
        method="what was computed",
        result="the numbers",
        verdict=FAILS,
        note="why",
        tables=[Table(["a"], [["1"]], "cap")],
        code="print(1)",
    )
    html = claim_html(c)
    assert 'class="claim v-bad" id="claim-x"' in html and "seed 000_x.txt" in html
    assert "“a &lt;claim&gt;”" in html and "原文" not in html
    for text in ("what was computed", "the numbers", "why", "<caption>cap</caption>", "print(1)"):
        assert text in html


# ------------------------------------------------------------------------------ browser


def chromium_or_skip():
    from support.cdp import find_chromium

    exe = find_chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is required in CI (bash scripts/install.sh --test installs it)")
        pytest.skip("headless chromium not installed (/usr/bin/chromium): browser test skipped")
    return exe


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = tmp_path_factory.mktemp("explain")
    for name in ("sinusoidal", "alibi"):
        explain.explain(name, root / name)  # the defaults a user gets
    return root


IMAGES_JS = """Array.from(document.images).map(i => {
  const r = i.getBoundingClientRect(), s = getComputedStyle(i);
  return {src: i.src, complete: i.complete, nw: i.naturalWidth, w: r.width, h: r.height,
          shown: s.display !== 'none' && s.visibility !== 'hidden' && i.offsetParent !== null};
})"""


@pytest.mark.browser
@pytest.mark.parametrize("name", ["sinusoidal", "alibi"])
def test_page_in_headless_chromium(rendered, name):
    from support.cdp import Browser

    exe = chromium_or_skip()
    url = (rendered / name / "index.html").as_uri()
    with Browser(exe) as browser:
        page = browser.open(url, width=1280, height=800)
        assert page.errors == []
        assert page.failed == []
        assert all(u.startswith(("file:", "data:")) for u in page.requests), page.requests
        images = page.evaluate(IMAGES_JS)
        assert len(images) >= (6 if name == "sinusoidal" else 2)
        for img in images:
            assert img["complete"] and img["nw"] > 0, img
            assert img["w"] > 100 and img["h"] > 50 and img["shown"], img
        # reads at 1280 wide: nothing overflows sideways
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        page.screenshot(ARTIFACTS / f"explain_{name}_1280x800.png")
        page.screenshot(ARTIFACTS / f"explain_{name}_full.png", full_page=True)
        if name == "sinusoidal":
            table = page.evaluate("document.getElementById('claim-002-table').innerText")
            assert "0.8415 / 0.8415" in table and "holds" in table
            ex = page.evaluate("document.getElementById('claim-003-worked-example').innerText")
            assert "does not hold" in ex
            assert "0.9950" in ex and "0.0100" in ex and "0.9998" in ex
