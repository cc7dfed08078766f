"""The docs' generated sections: the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->`
in the page that holds NAME, which a test compares with what the code generates. (They were
the README's; the README links to these pages.)"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PAGES = {
    "claims": "docs/claims.md",
    "arena": "docs/arena/findings.md",
    "lengths": "docs/arena/findings.md",
    "schemes": "docs/arena/findings.md",
    "stretch": "docs/stretch/findings.md",
    "hf-coverage": "docs/hf/README.md",
}


def generated_block(name: str) -> str:
    """The generated section NAME of its page (from the line after its begin marker)."""
    text = (REPO / PAGES[name]).read_text(encoding="utf-8")
    begin, end = f"<!-- {name}:begin -->\n", f"<!-- {name}:end -->"
    assert begin in text and end in text, f"{PAGES[name]} has no {name} section ({begin.strip()})"
    return text.split(begin)[1].split(end)[0]
