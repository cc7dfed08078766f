"""posenc: positional encodings for Transformers, behind one interface.

The public names are imported on first use (PEP 562), so that `posenc --help`, a command's
--help and `import posenc.cliargs` import no torch; `posenc.build(...)` imports what it needs.
"""

from __future__ import annotations

import importlib
import sys
import types

__version__ = "0.1.0"

# public name -> the module that defines it
_PUBLIC = {
    "ENCODINGS": "posenc.encodings",
    "HOOKS": "posenc.base",
    "PositionalEncoding": "posenc.base",
    "TransformerLM": "posenc.model",
    "attention": "posenc.attention",
    "build": "posenc.encodings",
    "check_positions": "posenc.checks",
    "closest_names": "posenc.checks",
    "resolve": "posenc.encodings",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'posenc' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


class _Posenc(types.ModuleType):
    """`posenc.attention` is the function, even once the subpackage of that name is imported
    (the import system binds a subpackage to its parent's attribute: ignored here)."""

    @property
    def attention(self):
        return importlib.import_module("posenc.attention").attention

    @attention.setter
    def attention(self, subpackage) -> None:
        pass


sys.modules[__name__].__class__ = _Posenc
