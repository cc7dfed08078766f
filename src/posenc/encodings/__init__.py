"""Every encoding, one module per family, and the registry: one plain dict, name -> class.

absolute   sinusoidal, scaled_sinusoidal, learned, onehot, index, phase, 2-D/3-D, nope
rotary     rope (+ scalings), xpos, rope_2d
bias       alibi, t5, kerple, fire, sandwich
relative   shaw, transformer_xl, deberta, cope
wrappers   randomized (wraps any of the above)
"""

from __future__ import annotations

from posenc.base import PositionalEncoding
from posenc.checks import lookup
from posenc.encodings import wrappers

ENCODINGS: dict[str, type[PositionalEncoding]] = {**wrappers.WRAPPABLE, **wrappers.ENCODINGS}


def resolve(name: str) -> type[PositionalEncoding]:
    """The encoding class registered under `name`; ValueError with the closest names if none."""
    return lookup("encoding", name, ENCODINGS)


def build(name: str, **kwargs) -> PositionalEncoding:
    """Build an encoding by registry name. The standard keywords (dim, heads, head_dim,
    max_len, train_len) are accepted by every encoding and ignored where unused."""
    return resolve(name)(**kwargs)
