"""README.md's generated sections: the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->`,
which a test compares with what the code generates."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def readme_block(name: str) -> str:
    """The README's generated section NAME (from the line after its begin marker)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    begin, end = f"<!-- {name}:begin -->\n", f"<!-- {name}:end -->"
    assert begin in text and end in text, f"README.md has no {name} section ({begin.strip()})"
    return text.split(begin)[1].split(end)[0]
