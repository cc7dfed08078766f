"""posenc explain in Chinese (posenc.explain.i18n): the catalog, the pages, the figures' glyphs,
the --claims table in README.zh-CN.md and the help."""

from __future__ import annotations

import re
import warnings
from collections import Counter
from html import escape
from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.readme import REPO

import posenc
from posenc.explain import i18n
from posenc.explain.claims import CAVEAT, FAILS, HOLDS, inventory, seed000, seed003
from posenc.explain.claims.base import seed_sentence, seed_text
from posenc.explain.i18n import GLOSSARY, catalog, key, tr
from posenc.explain.page import claim_html

ZH = catalog("zh")
SLOT = re.compile(r"\{(\d+)\}")
FIELD = re.compile(r"\{([a-z_]+)\}")
# three English words in a row: a sentence or phrase left untranslated
ENGLISH_RUN = re.compile(r"\b[A-Za-z][a-z']+(?:[ ,;:]+[A-Za-z][a-z']+){2,}\b")


def english_runs(text: str) -> list[str]:
    """Runs of >= 3 English words, after dropping what may stay English: encoding names,
    class names, papers, code-like tokens (with _ . ( [ = or digits)."""
    names = {s for cls in posenc.ENCODINGS.values() for s in (cls.paper, cls.__name__)}
    for name in sorted(names, key=len, reverse=True):  # the longest first: a paper holds others
        text = text.replace(name, " ")
    text = re.sub(r"\b[A-Z][\w-]+ et al\.", " ", text)  # a citation
    words = re.split(r"(\s+)", text)
    kept = [" " if re.search(r"[_.()\[\]=<>|/\\^`\d@]", w) else w for w in words]
    text = "".join(kept)
    names = "|".join(map(re.escape, posenc.ENCODINGS))
    text = re.sub(rf"\b(?:{names})\b", " ", text)
    return ENGLISH_RUN.findall(text)


class Visible(HTMLParser):
    """The text a reader sees (and title/alt attributes), without <style>, <pre>, <code>
    and the tutorial's own words (class="src")."""

    SKIP = {"style", "pre", "code", "script"}

    def __init__(self):
        super().__init__()
        self.out, self.stack = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        skip = tag in self.SKIP or a.get("class") == "src"
        if tag not in ("img", "meta", "br", "link"):
            self.stack.append(skip)
        if not any(self.stack):
            self.out += [v for k, v in attrs if k in ("title", "alt") and v]

    def handle_endtag(self, tag):
        if tag not in ("img", "meta", "br", "link") and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if not any(self.stack):
            self.out.append(data)


def visible(html: str) -> str:
    p = Visible()
    p.feed(html)
    return "\n".join(p.out)


# ------------------------------------------------------------------------------ the catalog


def test_every_entry_puts_back_the_numbers_and_fields_it_takes():
    assert len(ZH) > 500
    for k, v in ZH.items():
        assert sorted(SLOT.findall(k)) == sorted(SLOT.findall(v)), k
        assert sorted(FIELD.findall(k)) == sorted(FIELD.findall(v)), k
        assert v.strip() or not k.strip(), k


@given(
    st.lists(
        st.one_of(
            st.integers(-(10**6), 10**6).map(str),
            st.floats(1e-9, 1e9, allow_nan=False).map(lambda x: f"{x:.3g}"),
        ),
        min_size=4,
        max_size=4,
    )
)
def test_a_measured_text_keeps_its_numbers_in_chinese(nums):
    """One measurement, two renderings: the Chinese text carries exactly the English text's
    numbers (whatever they are), taken from the text, not from the catalog."""
    template = "{0} at T = {1}, {2} at T = {3}"
    english = template.format(*nums)
    assert key(english) == (template, nums)
    chinese = tr(english, "zh")
    assert chinese != english and re.search(r"[\u4e00-\u9fff]", chinese)
    assert Counter(i18n.NUM.findall(chinese)) == Counter(nums)


def test_english_is_the_fallback_and_a_miss_is_recorded():
    i18n.MISSING.clear()
    assert tr("a sentence nobody has translated, 3 times", "zh") == (
        "a sentence nobody has translated, 3 times"
    )
    assert i18n.MISSING["zh"] == {"a sentence nobody has translated, {0} times"}
    assert tr("holds", "en") == "holds" and tr("holds", "zh") == "成立"
    i18n.MISSING.clear()
    with pytest.raises(ValueError, match="--lang must be one of en, zh"):
        tr("holds", "fr")


STRICT = ("attention", "positional encoding", "wavelength", "dot product", "long-term decay",
          "query", "frequency", "word embedding")  # fmt: skip


def test_the_catalog_follows_the_glossary():
    """Where an English key uses one of the tutorials' terms, its Chinese uses theirs."""
    for term in STRICT:
        zh = GLOSSARY[term]
        tutorials = "".join(seed_text(s) for s in inventory.by_seed())
        assert zh in tutorials or term == "long-term decay", term  # the tutorials' own word
        for k, v in ZH.items():
            if re.search(rf"\b{term}\b", k, re.I) and not re.search(r"[_(]" + term, k):
                assert zh in v, (term, k, v)
    for v in (HOLDS, FAILS, CAVEAT):
        assert tr(v, "zh") == GLOSSARY[v]


# ------------------------------------------------------------------------------ the pages


def test_a_claim_in_chinese_quotes_the_tutorial_and_shows_the_same_numbers():
    for check in (seed000.claim_000_wavelengths, seed003.CHECKS[0], seed000.claim_000_binary):
        c = check(16, 32)
        en, zh = claim_html(c), claim_html(c, "zh")
        said = seed_sentence(c.seed, c.quote)
        assert c.quote.replace("**", "") in said and escape(said) in zh
        assert escape(c.claim) in en and escape(c.claim) not in zh
        assert f"第 {c.line} 行" in zh and tr(c.verdict, "zh") in zh

        def nums(html):  # the numbers shown, the quoted words aside
            html = re.sub(r"<blockquote.*?</blockquote>", "", html)
            return Counter(i18n.NUM.findall(visible(html)))

        assert nums(en) == nums(zh), check.__name__
        assert english_runs(visible(zh)) == [], check.__name__


def test_every_page_in_chinese(tmp_path):
    """`posenc explain --all --lang zh` (small sizes): every page and figure text found in the
    catalog, no English sentence left on a page, no glyph missing from the figures' font."""
    from posenc.cli import main as cli_main

    i18n.MISSING.clear()
    out = tmp_path / "zh"
    argv = ["--dim", "8", "--heads", "2", "--max-pos", "16", "--lang", "zh", "--out", str(out)]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*missing from font")
        assert cli_main(["explain", "--all", *argv]) == 0
    assert i18n.MISSING.get("zh", set()) == set()
    pages = [out / "index.html", out / "compare.html"]
    pages += [out / name / "index.html" for name in posenc.ENCODINGS]
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert '<html lang="zh-CN">' in html
        text = visible(html)
        assert english_runs(text) == [], (page, english_runs(text)[:5])
        assert len(re.findall(r"[\u4e00-\u9fff]", text)) > 100, page


def test_english_pages_do_not_read_the_catalog(tmp_path, monkeypatch):
    def refuse(lang):
        raise AssertionError(f"the English page read the {lang} catalog")

    monkeypatch.setattr(i18n, "catalog", refuse)
    from posenc import explain

    explain.explain("alibi", tmp_path, dim=8, heads=2, max_pos=16)
    html = (tmp_path / "index.html").read_text()
    assert '<html lang="en">' in html and "Claims of the seeds" in html


# ------------------------------------------------------------------------------ figures


def test_chinese_figure_texts_have_their_glyphs(tmp_path):
    """The CJK font comes from its package (no download); a missing glyph is an error here,
    and the check does catch one."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from posenc.explain import figures
    from posenc.explain.i18n.fonts import cjk_family

    family = cjk_family()
    fig = Figure()
    fig.suptitle("正弦位置编码：每个位置、每个维度的值 θ ≤ 2π")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*missing from font")
        fig.texts[0].set_fontfamily(family)
        fig.savefig(tmp_path / "ok.png")
        enc = posenc.build("rope", dim=16, heads=2, head_dim=16).eval()
        figs = figures.draw(enc, "rope", tmp_path, dim=16, heads=2, max_pos=16, lang="zh")
    assert len(figs) >= 4
    bad = Figure()
    bad.suptitle("正弦位置编码")  # DejaVu Sans alone has no CJK glyph
    with pytest.warns(UserWarning, match="missing from font"):
        bad.savefig(tmp_path / "bad.png")


# ------------------------------------------------------------------------------ README, CLI


def test_readme_zh_carries_the_generated_claims_table():
    """README.zh-CN.md's table is `posenc explain --claims --lang zh --arena <trained.ARENA>`,
    from the same checks as README.md's English one."""
    from posenc.explain import claims as C
    from posenc.explain.claims import trained

    text = (REPO / "README.zh-CN.md").read_text(encoding="utf-8")
    begin, end = "<!-- claims:begin -->\n", "<!-- claims:end -->"
    table = text.split(begin)[1].split(end)[0]
    dbs = [REPO / db for db in trained.ARENA.split(",")]
    generated = C.markdown_table(C.check_all(dim=64, max_pos=128, arena=dbs), "zh")
    assert table.strip() == generated.strip()
    verdicts = {GLOSSARY[v] for v in ("holds", "does not hold", "holds with a caveat",
                                      "not measured here", "error")}  # fmt: skip
    for line in generated.splitlines()[2:]:
        where, said, verdict, measured = line.strip("| ").split(" | ")
        assert verdict in verdicts and english_runs(measured) == [], line


@pytest.mark.parametrize(
    "argv, env, chinese",
    [
        (["--help", "--lang", "zh"], {}, True),
        (["--help", "--lang=zh"], {"LANG": "en_US.UTF-8"}, True),
        (["--help"], {"LANG": "zh_CN.UTF-8"}, True),
        (["--help"], {"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, True),
        (["--help"], {"LANG": "en_US.UTF-8"}, False),
        (["--help", "--lang", "en"], {"LANG": "zh_CN.UTF-8"}, False),
    ],
)
def test_explain_help_follows_lang_or_locale(argv, env, chinese, monkeypatch, capsys):
    from posenc.cli import main as cli_main

    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert cli_main(["explain", *argv]) == 0  # --help: printed, exit 0
    out = capsys.readouterr().out
    if chinese:
        assert out.startswith("用法：posenc explain") and "显示本帮助信息并退出" in out
        prose = re.sub(r"--?[\w-]+|\b[A-Z_]{2,}\b|\{[^}]*\}|`[^`]*`", " ", out)
        assert english_runs(prose) == [], english_runs(prose)
    else:
        assert out.startswith("usage: posenc explain") and "show this help message" in out


def test_other_commands_stay_english_under_a_zh_locale(monkeypatch, capsys):
    from posenc.cli import main as cli_main

    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert cli_main(["list", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: posenc list")


def test_claims_table_in_chinese_on_the_command_line(capsys):
    from posenc.cli import main as cli_main

    assert cli_main(["explain", "--claims", "--lang", "zh", "--dim", "16", "--max-pos", "32"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| 教程:行 | 教程原句 | 判定 | 测量值 |")
    assert "成立" in out and "holds" not in out


def test_a_missing_font_package_is_one_line_before_anything_is_written(tmp_path, monkeypatch,
                                                                       capsys):  # fmt: skip
    import sys

    from posenc.cli import main as cli_main
    from posenc.explain.i18n import fonts

    monkeypatch.setitem(sys.modules, fonts.PACKAGE, None)  # import fails: not installed
    fonts.cjk_family.cache_clear()
    try:
        out = tmp_path / "x"
        assert cli_main(["explain", "rope", "--lang", "zh", "--out", str(out)]) == 2
    finally:
        fonts.cjk_family.cache_clear()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--lang zh" in err and "pip install 'posenc[lab]'" in err
    assert not out.exists()
