"""rotary encodings (to be filled in)."""

from posenc.base import PositionalEncoding

ENCODINGS: dict[str, type[PositionalEncoding]] = {}
