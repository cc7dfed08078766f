"""Every `posenc.<dotted.path>` named in the source (docstrings, comments, messages) and in the
docs (README.md, CONTRIBUTING.md, docs/**/*.md) exists: a module, or an attribute of one. Keeps
references to modules that were moved or renamed (posenc.fast_rope, posenc.rope_scaling) out."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = [
    *sorted((ROOT / "src").rglob("*.py")),
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").rglob("*.md")),
]
# posenc.a.b (not inside a path or a longer name: src/posenc/x.py, my_posenc.x)
REFERENCE = re.compile(r"(?<![\w./-])posenc(?:\.[A-Za-z_]\w*)+")


def resolves(ref: str) -> bool:
    """ref is a module (found without running optional imports) or an attribute chain of one."""
    parts = ref.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:  # a parent is not a package
            spec = None
        if spec is None:
            continue
        obj = importlib.import_module(name) if i < len(parts) else None
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def references() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in FILES:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in REFERENCE.finditer(line):
                found.setdefault(m.group(0), []).append(f"{path.relative_to(ROOT)}:{n}")
    return found


def test_the_resolver_tells_real_from_stale():
    assert resolves("posenc.functional.apply_rope") and resolves("posenc.kernels.cpu_rope")
    assert resolves("posenc.base.PositionalEncoding.check_positions")
    assert not resolves("posenc.fast_rope") and not resolves("posenc.rope_scaling")
    assert not resolves("posenc.functional.apply_rope.nope")
    assert REFERENCE.findall("see posenc.fast_rope. and src/posenc/x.py") == ["posenc.fast_rope"]


@pytest.mark.parametrize("scope", ["src", "docs"])
def test_every_posenc_reference_resolves(scope):
    refs = {r: where for r, where in references().items()
            if any(w.startswith("src/") == (scope == "src") for w in where)}  # fmt: skip
    assert len(refs) > 20  # the scan finds the references there are
    stale = {r: where for r, where in refs.items() if not resolves(r)}
    assert not stale, "references to what does not exist: " + "; ".join(
        f"{r} ({', '.join(where[:3])})" for r, where in sorted(stale.items())
    )
