"""posenc: positional encodings for Transformers, behind one interface. Public names import on
first use (PEP 562): `posenc --help` and `import posenc.cliargs` import no torch."""

from __future__ import annotations

from posenc.lazy import lazy_exports

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
__all__ = lazy_exports(__name__, _PUBLIC, over_submodules=("attention",))
