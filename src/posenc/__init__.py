"""posenc: positional encodings for Transformers, behind one interface."""

from __future__ import annotations

import difflib

from posenc import absolute, bias, randomized, relative, rotary
from posenc.attention import attention
from posenc.base import PositionalEncoding, check_positions, default_positions
from posenc.model import TransformerLM

__version__ = "0.1.0"

# name -> class; one plain dict, each family module contributes its own.
ENCODINGS: dict[str, type[PositionalEncoding]] = {
    **absolute.ENCODINGS,
    **rotary.ENCODINGS,
    **bias.ENCODINGS,
    **relative.ENCODINGS,
    **randomized.ENCODINGS,
}


def closest_names(name: str, choices, n: int = 3) -> list[str]:
    """The closest names to `name` among `choices` (for "did you mean" errors)."""
    return difflib.get_close_matches(name, list(choices), n=n, cutoff=0.4)


def resolve(name: str) -> type[PositionalEncoding]:
    """The encoding class registered under `name`; ValueError with the closest names if none."""
    if not isinstance(name, str):
        raise TypeError(f"encoding name must be a str, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    if key in ENCODINGS:
        return ENCODINGS[key]
    close = closest_names(key, ENCODINGS)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"unknown encoding {name!r}{hint} Known encodings: {', '.join(sorted(ENCODINGS))}"
    )


def build(name: str, **kwargs) -> PositionalEncoding:
    """Build an encoding by registry name. Standard keywords (dim, heads, head_dim, max_len)
    are accepted by every encoding and ignored where unused."""
    return resolve(name)(**kwargs)


__all__ = [
    "ENCODINGS",
    "PositionalEncoding",
    "TransformerLM",
    "attention",
    "build",
    "check_positions",
    "closest_names",
    "default_positions",
    "resolve",
]
