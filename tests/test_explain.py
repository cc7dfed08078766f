"""posenc explain: the seeds' claims, the pages, the CLI; the pages in headless Chromium."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import torch

import posenc
from posenc import explain
from posenc.cli import main as cli_main
from posenc.explain import claims as C

ARTIFACTS = Path(__file__).parent / "_artifacts"
SMALL = dict(dim=32, heads=4, max_pos=64)


@pytest.fixture(scope="module")
def all_claims():
    return {c.id: c for c in C.check_all(dim=32, max_pos=64)}


# ------------------------------------------------------------------------------ claims


def test_every_claim_is_checked_with_a_seed_and_a_verdict(all_claims):
    assert len(all_claims) >= 20
    for c in all_claims.values():
        assert c.seed.endswith(".txt") and c.quote and c.result
        assert c.verdict in (C.HOLDS, C.FAILS, C.CAVEAT, C.UNMEASURED)
    # without --arena only the two arena-linked claims are not measured
    unmeasured = {c.id for c in all_claims.values() if c.verdict == C.UNMEASURED}
    assert unmeasured == {"claim-002-sinusoidal-extrapolates", "claim-002-learned-cannot"}


def test_seed_002_table_holds(all_claims):
    c = all_claims["claim-002-table"]
    assert c.verdict == C.HOLDS
    assert c.tables[0].rows[1][1] == "0.8415 / 0.8415"


def test_seed_003_example_is_wrong_with_correct_values(all_claims):
    c = all_claims["claim-003-worked-example"]
    assert c.verdict == C.FAILS
    p1 = c.tables[0].rows[0]  # t = 1: seed, 10^(2/4) formula, correct
    assert p1[1:3] == ["0.9950", "0.0998"]
    assert p1[3] == f"{torch.sin(torch.tensor(1 / 10**0.5)).item():.4f}"
    assert p1[5:] == ["0.0100", "1.0000"]


def test_seed_004_code_bugs_then_fixed(all_claims):
    c = all_claims["claim-004-code"]
    rows = c.tables[0].rows
    assert c.verdict == C.FAILS
    assert "AttributeError" in rows[0][1] and "arrange" in rows[0][1]
    assert rows[-1][1].startswith("runs")
    assert float(rows[-1][1].rsplit("=", 1)[1]) < 1e-5


def test_transformer_xl_code_is_absolute(all_claims):
    c = all_claims["claim-002-transformer-xl"]
    assert c.verdict == C.FAILS
    assert "posenc's transformer_xl" in c.result and "0.0e+00" in c.result


def test_seed_claims_that_hold_or_not(all_claims):
    assert all_claims["claim-000-unique"].verdict == C.HOLDS
    assert all_claims["claim-000-consistent"].verdict == C.HOLDS
    assert all_claims["claim-002-order"].verdict == C.CAVEAT  # a causal mask sees order
    assert all_claims["claim-002-frequency-order"].verdict == C.FAILS
    assert all_claims["claim-001-every-block"].verdict == C.FAILS
    assert "1 time(s)" in all_claims["claim-001-every-block"].result
    assert all_claims["claim-004-clock"].verdict == C.HOLDS
    assert "IndexError" in str(all_claims["claim-002-t5-deberta"].tables[0].rows)


def make_arena(path: Path, sinusoidal_long: float) -> Path:
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE results (task TEXT, encoding TEXT, seed INT, train_len INT, eval_len INT,"
        " metric TEXT, value REAL, status TEXT, reason TEXT)"
    )
    rows = []
    for seed in (0, 1):
        rows += [
            ("copy", "sinusoidal", seed, 32, 32, "accuracy", 0.98, "ok", None),
            ("copy", "sinusoidal", seed, 32, 64, "accuracy", sinusoidal_long, "ok", None),
            ("copy", "learned", seed, 32, 32, "accuracy", 0.99, "ok", None),
            ("copy", "learned", seed, 32, 64, "accuracy", None, "n/a", "past max_len"),
        ]
    con.executemany("INSERT INTO results VALUES (?,?,?,?,?,?,?,?,?)", rows)
    con.commit()
    con.close()
    return path


def test_arena_claims(tmp_path):
    db = make_arena(tmp_path / "a.db", sinusoidal_long=0.31)
    sin = C.claim_002_sinusoidal_extrapolates(32, 64, arena=db)
    learned = C.claim_002_learned_cannot(32, 64, arena=db)
    assert sin.verdict == C.FAILS and "0.98 at 32 -> 0.31" in sin.result
    assert learned.verdict == C.HOLDS and "past max_len" in learned.result
    db2 = make_arena(tmp_path / "b.db", sinusoidal_long=0.97)
    assert C.claim_002_sinusoidal_extrapolates(32, 64, arena=db2).verdict == C.HOLDS
    with pytest.raises(FileNotFoundError, match="--arena"):
        C.claim_002_learned_cannot(32, 64, arena=tmp_path / "missing.db")


def test_extrapolation_direction_and_unlearned_tasks():
    def rows(task, metric, at_l, far):
        return [
            dict(task=task, train_len=16, eval_len=E, metric=metric, value=v, status="ok",
                 reason="", seeds=2)
            for E, v in ((16, at_l), (128, far))
        ]  # fmt: skip

    checks = {
        label.split(",")[0] + "/" + label.split(", ")[2].split(" at")[0]: ok
        for label, ok, _ in C.extrapolates(
            rows("copy", "token_accuracy", 0.52, 0.15)  # accuracy falls: does not
            + rows("sort", "accuracy", 0.30, 0.0)  # not learned at L: not counted
            + rows("reverse", "accuracy", 0.90, 0.85)  # within 25%: extrapolates
            + rows("lm", "ppl", 6.85, 20.7)  # perplexity rises x3: does not
            + rows("lm", "loss@0-16", 1.9, 1.9)  # per-position bands: left to the arena
        )
    }
    assert checks == {
        "copy/token_accuracy": False,
        "sort/accuracy": None,
        "reverse/accuracy": True,
        "lm/ppl": False,
    }


# ------------------------------------------------------------------------------ pages / CLI


def test_cli_writes_page_and_summary(tmp_path, capsys):
    out = tmp_path / "t5"
    assert cli_main(["explain", "t5", "--dim", "32", "--max-pos", "64", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "shift invariance" in text and "shift-invariant" in text
    html = (out / "index.html").read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html
    for png in ("heatmap.png", "similarity.png"):
        assert (out / png).stat().st_size > 1000


@pytest.mark.parametrize(
    "argv, message",
    [
        (["explain", "sinusodial"], "did you mean"),
        (["explain"], "NAME"),
        (["explain", "rope", "--all"], "--all"),
        (["explain", "rope", "--dim", "7"], "--dim"),
        (["explain", "rope", "--max-pos", "4"], "--max-pos"),
    ],
)
def test_cli_bad_input(argv, message, tmp_path, capsys):
    assert cli_main(argv + ["--out", str(tmp_path / "x")]) == 2
    assert message in capsys.readouterr().err


def test_checkpoint_trained_state(tmp_path):
    torch.manual_seed(0)
    model = posenc.TransformerLM(
        vocab_size=16, dim=32, depth=1, heads=4, encoding="learned", max_len=32
    )
    with torch.no_grad():
        for p in model.encodings.parameters():
            p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32)).view_as(p))
    ckpt = tmp_path / "m.ckpt"
    torch.save({"config": model.config, "model": model.state_dict()}, ckpt)
    pg = explain.explain("learned", tmp_path / "page", checkpoint=ckpt, **SMALL)
    assert any(f.kind == "trained" for f in pg.figs) and pg.trained_measures
    assert (tmp_path / "page" / "trained_heatmap.png").is_file()
    assert "Measured properties, trained" in (tmp_path / "page" / "index.html").read_text()
    with pytest.raises(ValueError, match="encoding 'learned', not 'rope'"):
        explain.explain("rope", tmp_path / "p2", checkpoint=ckpt, **SMALL)


def test_explain_all_index_and_comparison(tmp_path, monkeypatch):
    few = {k: posenc.ENCODINGS[k] for k in ("sinusoidal", "rope", "alibi", "nope")}
    monkeypatch.setattr(posenc, "ENCODINGS", few)
    pages = explain.explain_all(tmp_path, **SMALL)
    assert [p.name for p in pages] == ["sinusoidal", "rope", "alibi", "nope"]
    index = (tmp_path / "index.html").read_text()
    compare = (tmp_path / "compare.html").read_text()
    assert 'id="claim-003-worked-example"' in index
    for pg in pages:
        assert f'href="{pg.name}/index.html"' in index
        for f in pg.figs:  # every figure of every page is on the comparison page
            assert f'src="{pg.name}/{f.file}"' in compare
            assert (tmp_path / pg.name / f.file).is_file()


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
