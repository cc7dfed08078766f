"""`posenc explain` on the command line: the page and summary it writes, bad input."""

from __future__ import annotations

import pytest

from posenc.cli import main as cli_main


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
        (["explain", "--all", "--max-pos", "4"], "--max-pos"),
        (["explain", "rope", "--arena", "/nonexistent/arena.sqlite"], "not found"),
        (["explain", "--all", "--arena", "/nonexistent/arena.sqlite"], "not found"),
        (["explain", "rope", "--checkpoint", "/nonexistent/model.ckpt"], "not found"),
        (["explain", "--claims", "--max-pos", "4"], "--max-pos"),
    ],
)
def test_cli_bad_input(argv, message, tmp_path, capsys):
    """Refused with one line, exit 2, and nothing written: the --out folder is not created."""
    out = tmp_path / "x" / "y"
    assert cli_main(argv + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE results SET value = 'abc' WHERE id IN (SELECT id FROM results LIMIT 3)",
        "UPDATE results SET train_len = 'x' WHERE id IN (SELECT id FROM results LIMIT 3)",
        "UPDATE results SET eval_len = -4 WHERE id IN (SELECT id FROM results LIMIT 1)",
        "UPDATE results SET seed = 0.5 WHERE id IN (SELECT id FROM results LIMIT 3)",
    ],
)
@pytest.mark.parametrize("what", [["--claims"], ["rope"]])
def test_a_corrupt_arena_database_is_an_input_error(edit, what, tmp_path, capsys):
    """A value edited by hand in an arena database: one line naming the database, exit 2,
    nothing written; never "a check raised: a bug to fix" (exit 1) nor a page of error
    verdicts (exit 0)."""
    import shutil
    import sqlite3
    from pathlib import Path

    db = tmp_path / "arena.sqlite"
    shutil.copy(Path(__file__).parents[2] / "docs/arena/quick/arena.sqlite", db)
    with sqlite3.connect(db) as conn:
        conn.execute(edit)
    out = tmp_path / "page"
    assert cli_main(["explain", *what, "--arena", str(db), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(db) in err and "corrupt row" in err, err
    assert not out.exists()


def test_a_check_that_raises_is_never_silent(tmp_path, capsys, monkeypatch):
    """`posenc explain NAME`: the page is written, the error said on stderr, exit 1."""
    from posenc.explain import claims as C

    def broken(*args, **kwargs):
        return C.Claim(id="claim-x", claim="x", result="boom", verdict=C.ERROR, error="boom")

    monkeypatch.setattr(C, "CHECKS", [*C.CHECKS[:1], broken])
    out = tmp_path / "page"
    assert cli_main(["explain", "rope", "--dim", "8", "--max-pos", "16", "--out", str(out)]) == 1
    assert "claim-x raised boom" in capsys.readouterr().err and (out / "index.html").is_file()


def test_explain_runs_for_every_registered_encoding(tmp_path, capsys):
    """`posenc explain --all` at small sizes: an index and a page per registered name, each
    with at least three figures; and `posenc explain NAME` for one that needs its length."""
    import posenc

    out = tmp_path / "all"
    argv = ["--dim", "8", "--heads", "2", "--max-pos", "16"]
    assert cli_main(["explain", "--all", *argv, "--out", str(out)]) == 0
    err = capsys.readouterr().err  # a line at once, then a bar over the pages
    assert err.startswith("explain: checking the tutorials' claims, then a page per encoding")
    assert f"{len(posenc.ENCODINGS)}/{len(posenc.ENCODINGS)} [" in err
    index = (out / "index.html").read_text()
    for name in posenc.ENCODINGS:
        page = out / name / "index.html"
        assert page.is_file() and f'href="{name}/index.html"' in index, name
        figs = list((out / name).glob("*.png"))
        assert len(figs) >= 3, f"{name}: {len(figs)} figures"
        assert page.read_text().count("<figure") == len(figs), name
    assert cli_main(["explain", "onehot", *argv, "--out", str(tmp_path / "one")]) == 0
    assert (tmp_path / "one" / "attention.png").exists() is False  # absolute: no attention
    assert len(list((tmp_path / "one").glob("*.png"))) >= 3
