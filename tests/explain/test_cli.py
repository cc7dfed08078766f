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
    ],
)
def test_cli_bad_input(argv, message, tmp_path, capsys):
    assert cli_main(argv + ["--out", str(tmp_path / "x")]) == 2
    assert message in capsys.readouterr().err
